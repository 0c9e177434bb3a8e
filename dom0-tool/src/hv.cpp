// SPDX-License-Identifier: GPL-2.0-only
// Backend-neutral parts of the hypervisor interface.
#include "hv.h"
#include "error.h"

#include <cstring>
#include <utility>

namespace busprof {

std::string op_error(long rc) {
    static const std::pair<int, const char*> names[] = {
        {EPERM, "EPERM"},   {ENOENT, "ENOENT"},       {ESRCH, "ESRCH"},
        {ENXIO, "ENXIO"},   {EBUSY, "EBUSY"},         {EEXIST, "EEXIST"},
        {EINVAL, "EINVAL"}, {ENOSPC, "ENOSPC"},       {E2BIG, "E2BIG"},
        {EAGAIN, "EAGAIN"}, {ETIMEDOUT, "ETIMEDOUT"}, {EOPNOTSUPP, "EOPNOTSUPP"},
        {EFAULT, "EFAULT"}, {ENOMEM, "ENOMEM"}};
    int e = static_cast<int>(-rc);
    for (auto& [n, s] : names)
        if (n == e)
            return std::string(std::strerror(e)) + " (" + s + ")";
    return std::strerror(e);
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
