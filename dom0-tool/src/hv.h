/* SPDX-License-Identifier: GPL-2.0-only */
// The dom0 view of a hypervisor: busprof_op sub-ops, and the channel a
// profiler gets to one domain (ioreq server + busprof page + event
// channels).  Backends: sim (busprof-simxen) and xen (libxen*).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "error.h"

extern "C" {
#include <busprof.h>
#include <xen/hvm/ioreq.h>
}

namespace busprof {

// The interface the daemon declares at attach: 1.3, memory-mapped spans,
// whose control messages (XEN_BUSPROF_CTRL_WIDE) it reads and whose ioreqs
// (type COPY) it serves.  A Xen of 1.2 takes it too (the same major) and
// never sends it a wide message.  The page's version, Xen's own, may be
// newer.
constexpr uint32_t kProfilerInterface = 0x00010003;
static_assert((kProfilerInterface >> 16) == (XEN_BUSPROF_INTERFACE_VERSION >> 16) &&
              kProfilerInterface <= XEN_BUSPROF_INTERFACE_VERSION);

namespace sim {
class Machine;
}

struct DomainInfo {
    uint16_t domid = 0;
    std::string name;
    unsigned nr_vcpus = 0;
};

class Channel {
  public:
    virtual ~Channel() = default;

    shared_iopage_t* ioreq = nullptr;
    xen_busprof_page* page = nullptr;
    unsigned nr_vcpus = 0;

    struct Ev {
        enum Kind {
            ring,
            ioreq,
            gone
        } kind;        // ring has messages / vCPU's ioreq / hypervisor went away
        unsigned vcpu; // for vcpu
    };
    // Waits for events, or until one of wake_fds (an eventfd or a timerfd)
    // is readable, which it then reads; appends what happened to out.  It
    // has no timeout of its own: a wait that arms a kernel timer each time
    // costs every access that wakes the caller, so the caller's ticks come
    // from a timerfd among wake_fds, armed once per tick.
    virtual void wait(std::span<const int> wake_fds, std::vector<Ev>& out) = 0;
    // Tells vCPU v its ioreq is answered.
    virtual void notify_vcpu(unsigned v) = 0;
    // Stops being the domain's profiler (XEN_BUSPROF_detach) but keeps the
    // ioreq server, its slots and events: Xen routes no new access here,
    // and every access it routed before is in the stamp slots, to be
    // served before the channel goes.  Idempotent; never throws.
    virtual void detach() = 0;
};

class Hypervisor {
  public:
    virtual ~Hypervisor() = default;
    virtual std::string name() const = 0;
    // A domain by name or numeric id.  Throws UserError if there is none.
    virtual DomainInfo lookup(const std::string& dom) = 0;
    // A dom0 busprof_op sub-op; records go with extract_reply: its nr of
    // them, struct xen_busprof_record_ext if its flags say
    // XEN_BUSPROF_REPLY_EXT, else struct xen_busprof_record, in `bytes`
    // bytes.  The errno of a refusal is the caller's to interpret.
    virtual Status op(unsigned cmd, void* arg, size_t size, const void* records = nullptr,
                      size_t bytes = 0) = 0;
    // Creates an ioreq server, attaches it as the domain's profiler, maps
    // the busprof page and binds the event channels.  Throws.
    virtual std::unique_ptr<Channel> attach(const DomainInfo& d, unsigned timeout_ms) = 0;
    // Another handle on the same hypervisor, for another thread: it shares
    // no connection and no lock with this one.  Throws.
    virtual std::unique_ptr<Hypervisor> reopen() = 0;
    // The machine whose devices the simulated guests' ports reach, for the
    // sim bus (sim/machine.h); none where the guests reach real hardware.
    virtual std::shared_ptr<sim::Machine> simulated_machine() { return nullptr; }
};

std::unique_ptr<Hypervisor> make_sim_hypervisor(const std::string& socket);
std::unique_ptr<Hypervisor> make_xen_hypervisor();

// Backend by name ("sim" or "xen"); sim_socket is used by sim only.
std::unique_ptr<Hypervisor> make_hypervisor(const std::string& backend,
                                            const std::string& sim_socket);

// XEN_BUSPROF_query of a domain: its policy, traps, counters and clock.
Result<xen_busprof_query> query(Hypervisor& hv, domid_t domid);

// The answer to a guest's extract request (XEN_BUSPROF_CTRL_extract).
struct ExtractAnswer {
    domid_t domid = 0;
    uint64_t request = 0; // the request message's seq
    int32_t status = 0;   // 0, or -errno for the guest
    uint64_t total = 0, snapshot = 0;
    std::span<const xen_busprof_record_ext> records; // XEN_BUSPROF_RECORD_WHO where known
    // Instead of records: the answer to a wide request (XEN_BUSPROF_CTRL_WIDE),
    // as Xen takes it from a profiler of interface 1.3 (XEN_BUSPROF_REPLY_WIDE).
    std::span<const xen_busprof_record_wide> wide;
    bool is_wide = false;
};
// Hands it to Xen (XEN_BUSPROF_extract_reply): extended records where Xen
// takes them (interface 1.2 on, BusprofPage::takes_extended_records), plain
// ones without who otherwise.  The errno of a refusal is the caller's.
Status reply_extract(Hypervisor& hv, const ExtractAnswer& a, bool extended);

} // namespace busprof
