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

void give_iomem(domid_t domid, uint64_t gfn, uint64_t mfn, uint64_t nr) {
    for (uint64_t i = 0; i < nr; i++) {
        g_host->configured[domid][gfn + i] = mfn + i;
        g_host->p2m[domid][gfn + i] = mfn + i;
    }
    g_host->iomem[domid].push_back(
        {static_cast<unsigned>(mfn), static_cast<unsigned>(mfn + nr - 1)});
}

std::string mapping_error(domid_t domid,
                          const std::vector<std::pair<uint64_t, uint64_t>>& trapped) {
    auto in_trap = [&](uint64_t gfn) {
        for (auto [first, last] : trapped)
            if (first >> 12 <= gfn && gfn <= last >> 12)
                return true;
        return false;
    };
    auto& p2m = g_host->p2m[domid];
    auto& saved = g_host->saved[domid];
    for (auto [gfn, mfn] : g_host->configured[domid]) {
        auto m = p2m.find(gfn);
        auto sv = saved.find(gfn);
        std::string at = " at gfn " + std::to_string(gfn);
        if (in_trap(gfn)) {
            if (m != p2m.end())
                return "a trapped page is still mapped" + at;
            if (sv == saved.end() || sv->second != mfn)
                return "a trapped page's frame is lost" + at;
        } else {
            if (m == p2m.end())
                return "an untrapped page is left unmapped" + at;
            if (m->second != mfn)
                return "a page is mapped to the wrong frame" + at;
            if (sv != saved.end())
                return "an untrapped page still has a saved frame" + at;
        }
    }
    for (auto [first, last] : trapped)
        for (uint64_t gfn = first >> 12; gfn <= last >> 12; gfn++)
            if (!g_host->configured[domid].count(gfn))
                return "a trap of a page the domain was never given at gfn " + std::to_string(gfn);
    if (!g_host->contract_errors.empty())
        return g_host->contract_errors.front();
    return {};
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

bool busprof_host_is_hvm(const struct domain* d) {
    return !host().pv[d->domain_id];
}

bool busprof_host_iomem_permitted(const struct domain* d, uint64_t gfn, uint64_t nr) {
    auto& configured = host().configured[d->domain_id];
    for (uint64_t i = 0; i < nr; i++) {
        auto it = configured.find(gfn + i);
        if (it == configured.end())
            return false;
        bool ok = false;
        for (const auto& r : host().iomem[d->domain_id])
            ok = ok || (r.first <= it->second && it->second <= r.last);
        if (!ok)
            return false;
    }
    return true;
}

bool busprof_host_mmio_direct(const struct domain* d, uint64_t gfn, uint64_t nr) {
    auto& configured = host().configured[d->domain_id];
    for (uint64_t i = 0; i < nr; i++) {
        if (!configured.count(gfn + i))
            return false;
        for (uint64_t e : host().emulated[d->domain_id])
            if (e == gfn + i)
                return false;
    }
    return true;
}

int busprof_host_mmio_unmap(struct domain* d, uint64_t gfn, unsigned int nr, unsigned int* done) {
    host().unmap_calls++;
    auto& p2m = host().p2m[d->domain_id];
    auto& saved = host().saved[d->domain_id];
    *done = 0;
    for (unsigned i = 0; i < nr; i++) {
        if (host().unmap_fail_after == 0)
            return host().unmap_rc;
        if (host().unmap_fail_after > 0)
            host().unmap_fail_after--;
        auto it = p2m.find(gfn + i);
        if (it == p2m.end()) {
            host().contract_errors.push_back("unmap of a page not mapped at gfn " +
                                             std::to_string(gfn + i));
            return -EINVAL;
        }
        saved[gfn + i] = it->second;
        p2m.erase(it);
        ++*done;
    }
    return 0;
}

void busprof_host_mmio_restore(struct domain* d, uint64_t gfn, unsigned int nr) {
    host().restore_calls++;
    auto& p2m = host().p2m[d->domain_id];
    auto& saved = host().saved[d->domain_id];
    for (unsigned i = 0; i < nr; i++) {
        auto it = saved.find(gfn + i);
        if (it == saved.end() || p2m.count(gfn + i)) {
            host().contract_errors.push_back("restore of a page not unmapped at gfn " +
                                             std::to_string(gfn + i));
            continue;
        }
        p2m[gfn + i] = it->second;
        saved.erase(it);
    }
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
