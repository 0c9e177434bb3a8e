// SPDX-License-Identifier: GPL-2.0-only
// The host hooks of xen/busprof.h for the core tests: a fake domain table,
// a fake clock, 4 KiB zeroed pages, and a record of every call.
#include "test_host.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace testhost {

static Host* g_host = new Host;

Host& host() {
    return *g_host;
}

void reset() {
    for (auto& [domid, pg] : g_host->live_pages)
        std::free(pg);
    delete g_host;
    g_host = new Host;
}

bool permitted(domid_t domid, unsigned first, unsigned last) {
    auto it = g_host->ioports.find(domid);
    if (it == g_host->ioports.end() || first > last)
        return false;
    // Every port must lie in some entry (entries may touch or overlap).
    for (unsigned p = first; p <= last; p++) {
        bool in = false;
        for (const auto& r : it->second)
            if (r.first <= p && p <= r.last) {
                in = true;
                break;
            }
        if (!in)
            return false;
    }
    return true;
}

} // namespace testhost

using testhost::host;

extern "C" {

struct domain* busprof_host_get_target(struct domain* caller, domid_t domid, int* rc) {
    host().get_target_calls++;
    if (caller->domain_id != 0) {
        *rc = -EPERM;
        return nullptr;
    }
    auto it = host().domains.find(domid);
    if (it == host().domains.end()) {
        *rc = -ESRCH;
        return nullptr;
    }
    return it->second;
}

void busprof_host_put_target(struct domain*) {
    host().put_target_calls++;
}

bool busprof_host_ioports_permitted(const struct domain* d, unsigned int first, unsigned int last) {
    return testhost::permitted(d->domain_id, first, last);
}

int busprof_host_server_ready(struct domain* d, uint16_t ioservid, domid_t profiler) {
    host().server_checks.push_back({d->domain_id, ioservid, profiler});
    return host().server_rc;
}

struct xen_busprof_page* busprof_host_page_alloc(struct domain* d) {
    if (host().page_alloc_fails)
        return nullptr;
    void* p = std::aligned_alloc(4096, 4096);
    if (!p)
        return nullptr;
    std::memset(p, 0, 4096);
    auto* pg = static_cast<struct xen_busprof_page*>(p);
    host().live_pages[d->domain_id] = pg;
    host().pages_allocated++;
    return pg;
}

void busprof_host_page_free(struct domain* d, struct xen_busprof_page* pg) {
    auto* bytes = reinterpret_cast<const uint8_t*>(pg);
    host().freed_page_copy[d->domain_id].assign(bytes, bytes + 4096);
    auto it = host().live_pages.find(d->domain_id);
    if (it != host().live_pages.end() && it->second == pg)
        host().live_pages.erase(it);
    host().pages_freed++;
    std::free(pg);
}

int busprof_host_evtchn_alloc(struct domain* d, domid_t) {
    if (host().evtchn_alloc_rc < 0)
        return host().evtchn_alloc_rc;
    unsigned port = host().next_port++;
    host().evtchn_allocs.push_back({d->domain_id, port});
    return static_cast<int>(port);
}

void busprof_host_evtchn_notify(struct domain* d, unsigned int port) {
    host().notifies.push_back({d->domain_id, port});
}

void busprof_host_evtchn_free(struct domain* d, unsigned int port) {
    host().evtchn_frees.push_back({d->domain_id, port});
}

uint64_t busprof_host_tsc(void) {
    return host().tsc;
}
uint32_t busprof_host_tsc_khz(void) {
    return host().tsc_khz;
}
uint32_t busprof_host_clock_flags(void) {
    return host().clock_flags;
}

} // extern "C"
