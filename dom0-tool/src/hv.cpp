// SPDX-License-Identifier: GPL-2.0-only
// Backend-neutral parts of the hypervisor interface.
#include "hv.h"
#include "error.h"

#include <vector>

namespace busprof {

Result<xen_busprof_query> query(Hypervisor& hv, domid_t domid) {
    xen_busprof_query q{};
    q.domid = domid;
    if (Status st = hv.op(XEN_BUSPROF_query, &q, sizeof(q)); !st)
        return st.error();
    return q;
}

Status reply_extract(Hypervisor& hv, const ExtractAnswer& a, bool extended) {
    xen_busprof_extract_reply rep{};
    rep.domid = a.domid;
    rep.request = a.request;
    rep.status = a.status;
    rep.total = a.total;
    rep.snapshot = a.snapshot;
    rep.nr = static_cast<uint32_t>(a.records.size());
    if (a.is_wide) {
        rep.nr = static_cast<uint32_t>(a.wide.size());
        rep.flags = XEN_BUSPROF_REPLY_WIDE;
        return hv.op(XEN_BUSPROF_extract_reply, &rep, sizeof(rep), a.wide.data(),
                     a.wide.size_bytes());
    }
    if (extended) {
        rep.flags = XEN_BUSPROF_REPLY_EXT;
        return hv.op(XEN_BUSPROF_extract_reply, &rep, sizeof(rep), a.records.data(),
                     a.records.size_bytes());
    }
    std::vector<xen_busprof_record> plain;
    plain.reserve(a.records.size());
    for (const auto& e : a.records) {
        plain.push_back(e.rec);
        plain.back().flags &= ~XEN_BUSPROF_RECORD_WHO;
    }
    return hv.op(XEN_BUSPROF_extract_reply, &rep, sizeof(rep), plain.data(),
                 plain.size() * sizeof(plain[0]));
}

std::unique_ptr<Hypervisor> make_hypervisor(const std::string& backend,
                                            const std::string& sim_socket) {
    if (backend == "sim")
        return make_sim_hypervisor(sim_socket);
    if (backend == "xen") {
#ifdef BUSPROF_HAVE_XEN
        return make_xen_hypervisor();
#else
        throw UserError("this busprof was built without the xen backend",
                        "build it where libxen-dev 4.17 is installed");
#endif
    }
    throw UserError("unknown backend '" + backend + "'", "use --backend sim or --backend xen");
}

} // namespace busprof
