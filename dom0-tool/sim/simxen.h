/* SPDX-License-Identifier: GPL-2.0-only */
// The simulated hypervisor: hosts the hypervisor-side C of xen-patches/
// (xen/common/busprof) behind the userspace shim and serves guests and dom0
// programs over the protocol of dom0-tool/sim/proto/sim-proto.h.
#pragma once

#include "fd.h"
#include "machine.h"
#include "ranges.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct bp_sim_msg;

namespace busprof::sim {

// The domains' port ranges use the command's own parser (ranges.h): one
// grammar for every range a user writes.
using busprof::MmioRange;
using busprof::PortRange;

struct DomainConfig {
    uint16_t domid;
    std::string name;
    std::vector<PortRange> ioports; // what the domain may access at all
    unsigned vcpus = 4;
    // Guest-physical pages of device memory the domain may access, as xl's
    // iomem= gives them: mapped 1:1 (guest-physical = machine address).
    std::vector<MmioRange> iomem;
};

// "DOMID:NAME:PORTS[:VCPUS][:iomem=RANGES]" -> DomainConfig, e.g.
// "1:demo:0x3f8-0x3ff,0x70-0x71:4:iomem=0xfebf0000-0xfecfffff" (RANGES as
// parse_mmio_ranges() takes them).  Throws UserError.
DomainConfig parse_domain_config(const std::string& text);

class SimHypervisor {
  public:
    SimHypervisor(std::string socket_path, std::vector<DomainConfig> domains);
    ~SimHypervisor();
    SimHypervisor(const SimHypervisor&) = delete;
    SimHypervisor& operator=(const SimHypervisor&) = delete;

    // The stamp clock of the CPUs that run guest vCPUs runs ns ahead of
    // dom0's (negative: behind), as the system time of Xen's CPUs can
    // disagree; 0 (the default): one clock.  For all simulators of the process.
    static void set_stamp_skew(int64_t ns);

    // Serves until stop() (from another thread or a signal handler's pipe).
    void run();
    void stop();
    // dom0's socket; the guests of domain D use domain_socket_path(D).
    const std::string& socket_path() const { return socket_path_; }
    std::string domain_socket_path(uint16_t domid) const;

    struct Domain;
    struct Conn;
    // A guest domain by id (the host hooks' target of a dom0 sub-op), or null.
    Domain* find(uint16_t domid);
    // The guest-physical pages of domain domid whose direct mapping a trap
    // removed now (busprof_host_mmio_unmap), for tests of the invariant
    // that every path maps them back.
    std::vector<uint64_t> unmapped_pages(uint16_t domid);

  private:
    void accept_conn(int listen_fd, Domain* dom);
    void reap_finished();
    void serve(std::shared_ptr<Conn> c);
    // One message, its reply.
    void handle(Conn& c, const ::bp_sim_msg& m, const std::vector<uint8_t>& payload);
    void reply(Conn& c, const ::bp_sim_msg& r, const std::vector<uint8_t>& out,
               const std::vector<FD>& fds);
    void hello(Conn& c, const ::bp_sim_msg& m, ::bp_sim_msg& r);
    void lookup_domain(Conn& c, const ::bp_sim_msg& m, ::bp_sim_msg& r);
    void create_ioreq_server(Conn& c, const ::bp_sim_msg& m, ::bp_sim_msg& r, std::vector<FD>& fds);
    void hand_out(Conn& c, const ::bp_sim_msg& m, ::bp_sim_msg& r, std::vector<FD>& fds);
    void hypercall(Conn& c, const ::bp_sim_msg& m, const std::vector<uint8_t>& payload,
                   ::bp_sim_msg& r, std::vector<uint8_t>& out);
    // A guest's port access, step by step.
    struct Waiting;
    enum class Answer { answered, gone, given_up };
    struct Access;
    void pio(Conn& c, ::bp_sim_msg& r, uint64_t task);
    void mmio(Conn& c, ::bp_sim_msg& r, uint64_t task);
    Waiting route(Conn& c, const Access& a);
    void pass_through(Domain& dom, ::bp_sim_msg& r, uint32_t ones);
    void mmio_pass_through(Domain& dom, Access& a);
    Answer serve_trapped(Conn& c, const Waiting& w, const Access& a, uint64_t* data);
    void send_ioreq(const Waiting& w, unsigned vcpu, const Access& a);
    int64_t arm_timer(Domain& dom, unsigned vcpu, int from_dm); // NOW() units
    Answer wait_for_answer(Domain& dom, const Waiting& w, int64_t deadline);
    void drop_conn(Conn& c);
    Domain* find(const std::string& name);

    std::string socket_path_;
    std::vector<std::unique_ptr<Domain>> domains_;
    std::unique_ptr<Domain> dom0_;
    Machine machine_; // the devices the domains' ports reach
    FD listen_;       // dom0
    std::vector<std::pair<FD, Domain*>> guest_listen_;
    FD wake_;
    std::atomic<bool> stopping_{false};
    // One thread per connection, as a vCPU blocks in it while the daemon
    // performs its access; finished ones are joined at the next accept.
    // A thread waits for its next message in recv() alone (one system call
    // per message, none for the wait); the stop shuts its socket down.
    struct Worker {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
        std::shared_ptr<Conn> conn;
    };
    void shut_down(const std::vector<Worker>& workers);
    void kick_servers();
    std::mutex threads_mu_; // threads_, and each Conn's sock against its close
    std::vector<Worker> threads_;
    std::atomic<int> next_conn_id_{1};

    // Xen's per-vCPU timers of trapped accesses (patch 0103): one thread
    // wakes the vCPUs whose deadline passed, so that a vCPU waits for the
    // profiler with no timer of its own to arm and cancel on every access.
    void run_timers();
    int64_t scan_timers(int64_t now, int64_t next); // NOW() units
    void wake_timers();
    std::mutex timer_mu_;
    std::condition_variable timer_cv_;
    bool timer_woken_ = false; // timer_mu_
    // When the timer thread looks next (NOW() units).  A vCPU whose
    // deadline is earlier wakes it.
    std::atomic<int64_t> timer_next_{0};
    std::thread timer_;
};

} // namespace busprof::sim
