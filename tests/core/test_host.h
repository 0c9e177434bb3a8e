/* SPDX-License-Identifier: GPL-2.0-only */
// A test-only host for the hypervisor-side C of xen-patches/: extern "C"
// definitions of every busprof_host_* hook (in test_host.cpp) over a fake
// domain table, with every call the core makes recorded for the tests.
#pragma once

extern "C" {
#include <xen/busprof.h>
}

#include <cstdint>
#include <map>
#include <vector>

namespace testhost {

struct ServerCheck {
    domid_t domid;
    uint16_t ioservid;
    domid_t profiler;
};

struct PortCall {
    domid_t domid;
    unsigned port;
};

struct Range {
    unsigned first, last;
};

struct Host {
    // The fake domain table, by id; the tests own the struct domains.
    std::map<domid_t, struct domain*> domains;
    // What each domain may access at all (ioports_access_permitted).
    std::map<domid_t, std::vector<Range>> ioports;

    // Recorded calls.
    std::vector<ServerCheck> server_checks;
    std::vector<PortCall> notifies;
    std::vector<PortCall> evtchn_allocs; // port handed out
    std::vector<PortCall> evtchn_frees;
    unsigned get_target_calls = 0, put_target_calls = 0;

    // Failure injection.
    int server_rc = 0; // returned by server_ready
    bool page_alloc_fails = false;
    int evtchn_alloc_rc = 0; // < 0: evtchn_alloc fails with it

    // The fake clock.
    uint64_t tsc = 1000;
    uint32_t tsc_khz = 2500000;
    uint32_t clock_flags = 0;

    // Pages handed out and not yet freed, by domain.
    std::map<domid_t, struct xen_busprof_page*> live_pages;
    unsigned pages_allocated = 0, pages_freed = 0;
    // A copy of the last page freed of each domain, taken just before the
    // memory was really freed (so ASan still catches a use after free).
    std::map<domid_t, std::vector<uint8_t>> freed_page_copy;

    unsigned next_port = 7;
};

Host& host();
// Forget all state (live pages are freed).
void reset();

// ioports_permitted: is every port of [first, last] in d's list?
bool permitted(domid_t domid, unsigned first, unsigned last);

} // namespace testhost
