// SPDX-License-Identifier: GPL-2.0-only
// Backend-neutral parts of the hypervisor interface.
#include "hv.h"
#include "error.h"

namespace busprof {

Result<xen_busprof_query> query(Hypervisor& hv, domid_t domid) {
    xen_busprof_query q{};
    q.domid = domid;
    if (Status st = hv.op(XEN_BUSPROF_query, &q, sizeof(q)); !st)
        return st.error();
    return q;
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
