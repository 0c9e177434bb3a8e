/* SPDX-License-Identifier: GPL-2.0-only */
// A test-only host for the hypervisor-side C of xen-patches/: extern "C"
// definitions of every busprof_host_* hook (in test_host.cpp) over a fake
// domain table, with every call the core makes recorded for the tests.
#pragma once

extern "C" {
#include <xen/busprof.h>
}

#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
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

    // MMIO (interface 1.3).  The p2m of each domain's device pages as the
    // domain was configured (gfn -> machine frame, `iomem=`) and as it is
    // now: a page busprof unmapped is missing from p2m and its frame in
    // saved, which only the host knows, as Xen's does.
    std::map<domid_t, std::map<uint64_t, uint64_t>> configured;
    std::map<domid_t, std::map<uint64_t, uint64_t>> p2m;
    std::map<domid_t, std::map<uint64_t, uint64_t>> saved;
    // Machine frames each domain has iomem permission for.
    std::map<domid_t, std::vector<Range>> iomem;
    // Pages Xen emulates or that hold an MSI-X table or PBA: not direct.
    std::map<domid_t, std::vector<uint64_t>> emulated;
    std::map<domid_t, bool> pv; // PV domains (default: HVM/PVH)
    // Failure injection: unmap fails (-ENOMEM) after this many more pages.
    int unmap_fail_after = -1;
    int unmap_rc = -ENOMEM;
    unsigned unmap_calls = 0, restore_calls = 0;
    // A restore of a page that was not unmapped, or an unmap of one that
    // is not mapped: the core broke the host's contract.
    std::vector<std::string> contract_errors;
};

Host& host();
// Forget all state (live pages are freed).
void reset();

// ioports_permitted: is every port of [first, last] in d's list?
bool permitted(domid_t domid, unsigned first, unsigned last);

// Give domid the device frames [mfn, mfn + nr) at [gfn, gfn + nr), mapped
// directly and with iomem permission (what `iomem=` does).
void give_iomem(domid_t domid, uint64_t gfn, uint64_t mfn, uint64_t nr);

// The mapping invariant: every configured page of domid is either mapped
// to its own frame, or unmapped with that frame saved and inside one of
// `trapped` (spans of addresses); every trapped page is unmapped.  Empty
// if it holds, else what is wrong.
std::string mapping_error(domid_t domid, const std::vector<std::pair<uint64_t, uint64_t>>& trapped);

} // namespace testhost
