/* SPDX-License-Identifier: GPL-2.0-only */
// The busprof daemon: the profiler of one guest domain.
//
// Three threads, each owning its room:
//  - the ioreq thread (run()) serves the guest: ioreqs, the control ring,
//    the session state machine.  It does no SQL, takes no lock that is
//    held across I/O, and never waits on storage.
//  - the writer thread (Writer, writer.h) owns the trace DB: records, markers,
//    events, session rows and the answers to the guest's extracts.  The
//    ioreq thread hands them over through the writer's Producer
//    (producer.h), which never waits for it.
//  - the control thread (ControlServer) serves `busprof status/pause/...`
//    and hands each request to the ioreq thread through a mailbox.
#pragma once

#include "bus.h"
#include "busprof_page.h"
#include "control_server.h"
#include "fd.h"
#include "hv.h"
#include "session.h"
#include "tsc_clock.h"
#include "writer.h"

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace busprof {

struct DaemonConfig {
    std::string backend = "sim";
    std::string sim_socket;
    std::string bus = "sim";
    std::string db;
    std::string control_socket;
    std::string domain;
    unsigned timeout_ms = 1000;
    size_t queue_capacity = 65536;
    size_t note_capacity = 4096;
    // The writer's scheduling, tuned (docs/design.md, "The writer's bursts")
    // and not for the user to choose:
    // its threads above the one that serves the guest, so a burst is not cut;
    int writer_nice = Writer::kDefaultWriterNice;
    // a burst every second at most, so that a slow guest's records wait at most that;
    int burst_ms = Writer::kBurstMs;
    // 8192 records a burst: larger ones were cut as often, smaller held more accesses;
    size_t burst_rows = Writer::kBurstRows;
    // the commit at SCHED_FIFO 1 (0: none), which the kernel's ticks do not cut.
    int writer_rtprio = Writer::kDefaultWriterRtprio;
    // The nice value of the thread that serves the guest (Daemon::run), if
    // given; by default on Xen at most kXenServeNice, above dom0's other
    // work, which it would otherwise wait for at each access (and below the
    // writer's bursts), and on the simulator, whose guest vCPUs are dom0
    // threads too and which a thread above them reorders, as started.
    std::optional<int> serve_nice;
    static constexpr int kXenServeNice = -10;
    Triggers triggers;
    SimBusConfig sim_bus;
    // Where the hypervisor and the bus come from when set (the daemon's
    // unit tests give fakes); otherwise the backend and bus named above.
    std::function<std::unique_ptr<Hypervisor>()> hypervisor_factory;
    std::function<std::unique_ptr<Bus>()> bus_factory;
};

class Daemon {
  public:
    explicit Daemon(DaemonConfig cfg);
    ~Daemon();
    Daemon(const Daemon&) = delete;

    // Serves until stop(), until Xen detaches the profiler or the
    // hypervisor goes away.  Returns EXIT_SUCCESS, or EXIT_FAILURE when
    // the daemon failed its guest (an access timed out), the hypervisor
    // went away, or records could not be written.
    int run();
    // Any thread.  cause: the stop marker's cause.
    void stop(const char* cause = "signal");

    // The session's row in the trace DB; waits up to wait_ms for the writer
    // to create it, 0 if it has not.  The producer's call: before run(), on
    // the thread that made the daemon, or on run()'s.
    int64_t session_id(int wait_ms);
    const DomainInfo& domain() const { return dom_; }

    // Control thread: one request line, its reply.
    std::string control(const std::string& line);

  private:
    friend class DaemonTestPeer; // tests/unit/daemon_test.cpp

    struct Pending {
        bool valid = false;
        bool record = false;
        bool pre = false; // served before the start: for the pre-trigger window
        uint64_t seq = 0;
        uint64_t served = 0; // the daemon's count of accesses served, this one's
        Record r{};
    };
    struct Request {
        ControlCommand cmd;
        std::promise<std::string> reply;
    };

    // One access, from its ioreq to its pending record.
    struct Access {
        unsigned port = 0, size = 0;
        bool mmio = false; // an ioreq of type COPY: addr is guest-physical
        uint64_t addr = 0;
        uint32_t type = 0, count = 0; // the ioreq's, for a refusal
        bool write = false, valid = false;
        uint64_t mask = 0, value = 0; // value: written, or read once served
        bool stamped = false;         // Xen's stamp is this access's
        BusprofPage::Trap trap{};     // that stamp
        bool abandoned = false;       // Xen gave up on it first
        uint8_t status = XEN_BUSPROF_STATUS_OK;
        uint64_t t0 = 0, t1 = 0, now = 0; // the bus access; the answer's time
        uint64_t tsc0 = 0;                // with the TSC clock: the TSC read just before t0
    };

    void answer_extracts();
    // ioreq thread
    void raise_serving_thread();
    void arm_tick(uint64_t now, int within_ms);
    void serve_ctrl_ring();
    void on_ctrl(const xen_busprof_ctrl_msg& m, const BusprofPage::Span& span);
    void on_trap_ctrl(const xen_busprof_ctrl_msg& m, uint64_t t, int vcpu, bool by_dom0);
    void on_mmio_trap_ctrl(const xen_busprof_ctrl_msg& m, const BusprofPage::Span& span, uint64_t t,
                           int vcpu, bool by_dom0);
    void on_guest_pause(bool pause, uint64_t t, int vcpu, const std::string& origin);
    void serve_ioreq(unsigned v);
    bool claim_ioreq(unsigned v, ioreq_t* p, ioreq_t& req);
    Access read_access(unsigned v, const ioreq_t& req);
    void answer_access(unsigned v, ioreq_t* p, Access& a);
    void keep_pending(unsigned v, const Access& a);
    bool may_serve(unsigned port, unsigned size);
    bool may_serve_mmio(uint64_t addr, unsigned size);
    void resync_traps();
    void resync_mmio_traps();
    bool grant(std::pair<uint16_t, uint16_t> r, uint64_t t);
    bool grant_mmio(std::pair<uint64_t, uint64_t> r, uint64_t t);
    bool bus_allows(const std::function<void()>& ask, uint64_t t);
    void timed_out(unsigned v, uint64_t t);
    void finalize(unsigned v, bool force);
    void finalize_all(bool force);
    void barrier();
    void drain();
    void sweep_after_detach();
    void settle(const Pending& pd);
    void release_settled(bool all);
    void complete(const Pending& pd);
    void flush_pre_window();
    void queue_record(Record r);
    void transition(const char* kind, const std::string& cause, uint64_t now);
    void publish();
    void begin_session(uint64_t now);
    void serve_requests();
    std::string handle(ControlCommand cmd);
    void end_session(const char* cause);
    uint64_t finish();
    uint64_t stamp_ns(uint64_t tsc) const;
    uint64_t to_ns(uint64_t tsc) const;
    uint64_t trap_ns(const Access& a) const;
    void begin_bus(Access& a);
    void calibrate_clock();
    bool use_tsc_clock();
    struct Bracket {
        uint64_t width, mid, now; // two reads' distance and middle, the query's stamp
    };
    Bracket bracket_query(uint64_t (*clock)());

    DaemonConfig cfg_;
    std::unique_ptr<Hypervisor> hv_;
    std::unique_ptr<Bus> bus_;
    DomainInfo dom_;
    std::unique_ptr<Writer> writer_;
    Producer* producer_ = nullptr; // writer_'s, for the ioreq thread (and the constructor)
    std::unique_ptr<Channel> chan_;
    BusprofPage page_; // chan_'s

    // ioreq thread only
    std::vector<Pending> pending_;
    // Whole records that wait for an access served before them, still
    // pending on another vCPU: ids follow the order of service.
    std::vector<Pending> settled_; // reserved: serving allocates nothing
    static constexpr size_t kSettledMax = 1024;
    uint64_t served_count_ = 0;
    std::deque<Record> pre_window_; // the last --pre-trigger accesses before the start
    std::vector<bool> abandoned_;   // Xen gave up on the vCPU's request
    std::vector<std::pair<uint16_t, uint16_t>> traps_;        // trapped now
    std::vector<std::pair<uint16_t, uint16_t>> granted_;      // bus access granted
    std::vector<std::pair<uint64_t, uint64_t>> mmio_traps_;   // memory-mapped, trapped now
    std::vector<std::pair<uint64_t, uint64_t>> mmio_granted_; // and granted
    uint64_t last_stamp_seq_[XEN_BUSPROF_MAX_VCPUS] = {};
    FD tick_;                // timerfd: the loop's turns when no event comes
    uint64_t tick_at_ = 0;   // when it is armed for (monotonic ns); 0: not armed
    uint64_t served_ns_ = 0; // the last access's time this turn of the loop; 0: none
    int64_t tsc_offset_ = 0;
    int64_t clock_error_ns_ = 0;        // +/- of tsc_offset_ (0: Xen stamps our clock)
    std::optional<TscClock> tsc_clock_; // Xen stamps the TSC, which dom0 reads too
    uint32_t seen_lost_ = 0;
    bool queue_full_reported_ = false;
    bool detached_ = false, gone_ = false;
    bool detaching_ = false; // drain(): the detach message to come is ours
    // The session's failures that `busprof status` reports and no row counts.
    struct Refusals {
        uint64_t accesses = 0; // answered all ones, not served
        uint64_t ranges = 0;   // trapped ranges the bus refused
    } refusals_;
    Session session_;
    uint32_t session_ord_ = 0;
    SessionCounters counters_;

    // shared: explicit and small
    std::mutex req_mu_; // requests_
    std::vector<std::shared_ptr<Request>> requests_;
    std::vector<std::shared_ptr<Request>> serving_; // ioreq thread: the requests it answers
    std::atomic<bool> stopping_{false};
    std::atomic<const char*> stop_cause_{"shutdown"};
    // The extract replies Xen refused, counted on the writer's thread.
    std::shared_ptr<std::atomic<uint64_t>> extract_errors_ =
        std::make_shared<std::atomic<uint64_t>>(0);
    FD wake_;
    std::unique_ptr<ControlServer> control_;
};

} // namespace busprof
