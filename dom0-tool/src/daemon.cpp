// SPDX-License-Identifier: GPL-2.0-only
#include "daemon.h"

#include "clock.h"
#include "control_reply.h"
#include "error.h"
#include "ioreq_slot.h"
#include "log.h"
#include "writer_sched.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <utility>

namespace busprof {

Daemon::Daemon(DaemonConfig cfg) : cfg_(std::move(cfg)), session_(cfg_.triggers) {
    if (cfg_.domain.empty())
        throw UserError("no domain given", "name the guest to profile: busprof daemon DOMAIN");
    if (!cfg_.bus_factory && cfg_.bus != "sim" && cfg_.bus != "port")
        throw UserError("unknown bus '" + cfg_.bus + "'", "use --bus sim or --bus port");

    writer_ =
        std::make_unique<Writer>(cfg_.db, cfg_.queue_capacity, cfg_.note_capacity, cfg_.writer_nice,
                                 cfg_.burst_ms, cfg_.burst_rows, cfg_.writer_rtprio);
    producer_ = &writer_->producer();
    hv_ = cfg_.hypervisor_factory ? cfg_.hypervisor_factory()
                                  : make_hypervisor(cfg_.backend, cfg_.sim_socket);
    // After the hypervisor: a simulated one has the devices a sim bus reaches.
    if (cfg_.bus_factory)
        bus_ = cfg_.bus_factory();
    else if (cfg_.bus == "sim")
        bus_ = make_sim_bus(cfg_.sim_bus, hv_->simulated_machine());
    else
        bus_ = make_port_bus();
    dom_ = hv_->lookup(cfg_.domain);
    wake_ = FD(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_)
        throw_errno("eventfd");
    tick_ = FD(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!tick_)
        throw_errno("timerfd_create");

    chan_ = hv_->attach(dom_, cfg_.timeout_ms);
    page_ = BusprofPage(chan_->page);
    // Xen refuses to attach to more; the stamp slots below rely on it.
    if (chan_->nr_vcpus > XEN_BUSPROF_MAX_VCPUS)
        throw SystemError("attach reported " + std::to_string(chan_->nr_vcpus) + " vCPUs", EPROTO);
    pending_.resize(chan_->nr_vcpus);
    settled_.reserve(kSettledMax + 1);
    abandoned_.resize(chan_->nr_vcpus);
    for (unsigned v = 0; v < chan_->nr_vcpus; v++)
        last_stamp_seq_[v] = page_.routed(v);
    seen_lost_ = page_.ctrl_lost();
    if (!page_.stamps_dom0_clock() && !use_tsc_clock())
        calibrate_clock();
    answer_extracts();

    // The socket appears once the daemon is attached: a client that sees
    // it can rely on that.
    if (!cfg_.control_socket.empty())
        control_ = std::make_unique<ControlServer>(
            cfg_.control_socket, [this](const std::string& line) { return control(line); });

    // Only a daemon that is fully set up leaves a session row behind.
    begin_session(now_ns());
}

// The writer answers the guest's extracts once the records before them
// are in, on a hypervisor handle of its own: a reply never waits for a
// call of the ioreq thread's on a shared connection, nor holds one up.
void Daemon::answer_extracts() {
    std::shared_ptr<Hypervisor> hv = hv_->reopen();
    const bool extended = page_.takes_extended_records();
    writer_->on_extract(
        [errors = extract_errors_, hv, extended](const ExtractRequest& r, ExtractResult& res) {
            const ExtractAnswer a{r.domid,      r.msg.seq,   res.status, res.total,
                                  res.snapshot, res.records, res.wide,   r.wide};
            Status st = reply_extract(*hv, a, extended);
            if (!st) {
                errors->fetch_add(1, std::memory_order_relaxed);
                log(LogLevel::warning, "extract reply refused: %s", st.error().message().c_str());
            }
        });
}

// A new session row (at start, and at each rearm) and its first counters.
void Daemon::begin_session(uint64_t now) {
    SessionRow row{dom_.domid,
                   dom_.name,
                   hv_->name(),
                   bus_->name(),
                   to_string(session_.state()),
                   cfg_.triggers.start_text(),
                   cfg_.triggers.stop_text(),
                   now,
                   cfg_.triggers.pre_trigger};
    session_ord_ = producer_->begin_session(row);
    pre_window_.clear(); // the last session's
    counters_.clock_error_ns = clock_error_ns_;
    publish();
}

Daemon::~Daemon() {
    finish();
}

// Ends the session, detaches and writes out everything queued; the number
// of records and notes that could not be written (0: nothing lost).
uint64_t Daemon::finish() {
    control_.reset(); // no more requests
    if (chan_) {
        finalize_all(true);
        end_session(stop_cause_.load());
        chan_.reset(); // detach before the last flush
    }
    uint64_t lost = 0;
    if (writer_) {
        lost = writer_->close(5000);
        if (lost)
            log(LogLevel::error, "%llu records and notes could not be written to %s: %s",
                static_cast<unsigned long long>(lost), cfg_.db.c_str(),
                writer_->last_error().c_str());
        if (writer_->rt_refused())
            log(LogLevel::warning,
                "the writer's commits ran at its nice value, not at SCHED_FIFO priority %d: that"
                " needs CAP_SYS_NICE or an RLIMIT_RTPRIO of %d; where the guest's accesses keep a"
                " CPU busy, the scheduler may cut a burst and hold more accesses",
                cfg_.writer_rtprio, cfg_.writer_rtprio);
        producer_ = nullptr;
        writer_.reset();
    }
    return lost;
}

int64_t Daemon::session_id(int wait_ms) {
    return producer_->session_row(session_ord_, wait_ms);
}

// Where the stamp clock's 0 lies on CLOCK_MONOTONIC: bracket a query that
// reads it and keep the tightest of a few tries.  For Xen's system time
// (a Xen whose TSC is not reliable), which dom0's CLOCK_MONOTONIC follows
// at the same rate as far as Xen's calibration holds: one offset for the
// whole session.
void Daemon::calibrate_clock() {
    Bracket b = bracket_query(now_ns);
    tsc_offset_ = static_cast<int64_t>(b.mid) - static_cast<int64_t>(stamp_ns(b.now));
    clock_error_ns_ = static_cast<int64_t>(b.width / 2);
    log(LogLevel::info, "Xen clock offset %lld ns, +/- %llu ns",
        static_cast<long long>(tsc_offset_), static_cast<unsigned long long>(b.width / 2));
}

// The tightest of 16 brackets of a query (which reads the stamp clock) by
// two reads of `clock`: their distance, their middle and the query's stamp.
Daemon::Bracket Daemon::bracket_query(uint64_t (*clock)()) {
    Bracket best{UINT64_MAX, 0, 0};
    for (int i = 0; i < 16; i++) {
        uint64_t a = clock();
        auto q = query(*hv_, dom_.domid);
        uint64_t b = clock();
        if (!q)
            throw SystemError("reading Xen's clock (XEN_BUSPROF_query)", q.error().value());
        if (b >= a && b - a < best.width)
            best = Bracket{b - a, a + (b - a) / 2, q->now};
    }
    return best;
}

// Xen stamps the TSC (XEN_BUSPROF_PAGE_CLOCK_TSC): relate it to dom0's
// clock read for read (TscClock), once this process's reads of the TSC
// are seen to agree with Xen's: a query's stamp must fall between two
// reads around it.  If they disagree (a dom0 whose TSC reads are offset
// or scaled), one offset as for system time, at Xen's estimate of the
// rate: false.
bool Daemon::use_tsc_clock() {
    if (!page_.stamps_tsc())
        return false;
    Bracket b = bracket_query(read_tsc);
    int64_t best = b.width == UINT64_MAX ? INT64_MAX : static_cast<int64_t>(b.width);
    int64_t off = static_cast<int64_t>(b.now - b.mid);
    // Xen's CPUs keep their counters in step: within the bracket, or
    // within what two CPUs' counters may differ by (a microsecond).
    int64_t slack = best / 2 + static_cast<int64_t>(page_.tsc_khz() / 1000);
    if (best == INT64_MAX || off > slack || off < -slack) {
        log(LogLevel::warning,
            "Xen stamps the TSC, but this process reads it %lld ticks away from Xen's (+/- %lld):"
            " stamps related by one offset at %u kHz",
            static_cast<long long>(off), static_cast<long long>(best / 2), page_.tsc_khz());
        return false;
    }
    tsc_clock_.emplace(page_.tsc_khz());
    const TscClock::Pair& p = tsc_clock_->first();
    clock_error_ns_ =
        static_cast<int64_t>(static_cast<double>(p.half) * tsc_clock_->ns_per_tick(p)) + 1;
    log(LogLevel::info,
        "Xen stamps the TSC (%u kHz by Xen's estimate), read by this process"
        " %lld ticks from Xen's (+/- %lld)",
        page_.tsc_khz(), static_cast<long long>(off), static_cast<long long>(best / 2));
    return true;
}

void Daemon::stop(const char* cause) {
    const char* expected = "shutdown";
    stop_cause_.compare_exchange_strong(expected, cause);
    stopping_ = true;
    uint64_t one = 1;
    if (wake_)
        (void)!::write(wake_.get(), &one, sizeof(one));
}

// The stamp clock in ns, on its own time line.
uint64_t Daemon::stamp_ns(uint64_t tsc) const {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(tsc) * 1000000 / page_.tsc_khz());
}

// Xen's stamp of an access's trap on CLOCK_MONOTONIC.  With the TSC clock
// and a bus access, against the TSC read just before it and t0: the stamp
// is then only as old as the vCPU's wait for this thread, and the rate's
// error counts over that alone.  Converted here, after the notify, it
// would count over whatever held this thread since as well, and a trap
// could come out after its own bus access.
uint64_t Daemon::trap_ns(const Access& a) const {
    if (tsc_clock_ && a.tsc0)
        return tsc_clock_->to_ns(a.trap.tsc, TscClock::Pair{a.tsc0, a.t0, 0});
    return to_ns(a.trap.tsc);
}

// The stamp clock on CLOCK_MONOTONIC.
uint64_t Daemon::to_ns(uint64_t tsc) const {
    if (page_.stamps_dom0_clock())
        return tsc;
    if (tsc_clock_)
        return tsc_clock_->to_ns(tsc);
    return static_cast<uint64_t>(static_cast<int64_t>(stamp_ns(tsc)) + tsc_offset_);
}

// A guest's vCPU waits for this thread through each of its accesses, and
// on Xen it is the only thread of dom0's on that path.  Where dom0's CPU
// is busy with other work, a thread at the same priority as that work
// waits its turn in the run queue once woken (in the system test, dom0's
// one vCPU busy with the test's own processes: 280-380 us a wake-up on
// average, against 28-49 us for a plain ioreq server's thread beside it,
// and the accesses that waited a tick of dom0's kernel or more made the
// p99).  So on Xen it runs above dom0's other work (nice -10 by default)
// and below the writer's bursts, which begin only between accesses
// (AccessGate).  On the simulator the guest's vCPUs are dom0
// threads at nice 0, and a thread above them reordered them: with 4 vCPUs,
// pinned, recording on, p99.9 1.35-1.65x that with recording off, against
// 0.96-1.01x with the thread at their level (trap_path.py --pin, three
// rounds each); there it stays as started by default.  Threads made before this
// (the writer's, the control socket's) keep their own values.
void Daemon::raise_serving_thread() {
    if (!cfg_.serve_nice && cfg_.backend != "xen")
        return;
    const int tid = static_cast<int>(::gettid());
    const int policy = ::sched_getscheduler(tid);
    if (policy == SCHED_FIFO || policy == SCHED_RR)
        return; // run at a real-time priority: above all of that already
    errno = 0;
    const int was = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    if (errno != 0)
        return;
    // Given, exactly; by default never nicer than the daemon was started.
    const int want = cfg_.serve_nice.value_or(std::min(was, DaemonConfig::kXenServeNice));
    if (was == want)
        return;
    if (!set_nice(tid, want))
        log(LogLevel::warning,
            "the thread that serves the guest stays at nice %d, not %d: raising it needs"
            " CAP_SYS_NICE; where dom0's CPU is busy, accesses may wait for it",
            was, want);
}

// The loop turns at least every within_ms when no event comes.  The
// timerfd is armed only when it would fire too late (about once a tick
// under load), not on every wait: a wait with a timeout arms a kernel timer
// each time it sleeps, and this thread sleeps once an access.
void Daemon::arm_tick(uint64_t now, int within_ms) {
    uint64_t due = now + static_cast<uint64_t>(within_ms) * 1000000u;
    if (tick_at_ > now && tick_at_ <= due)
        return;
    itimerspec its{};
    its.it_value.tv_sec = static_cast<time_t>(due / 1000000000u);
    its.it_value.tv_nsec = static_cast<long>(due % 1000000000u);
    if (::timerfd_settime(tick_.get(), TFD_TIMER_ABSTIME, &its, nullptr) < 0)
        throw_errno("timerfd_settime");
    tick_at_ = due;
}

int Daemon::run() {
    raise_serving_thread();
    std::vector<Channel::Ev> evs;
    // An access reads the clock twice, around the bus access, and its end
    // is the time of the rest of the turn and the next wait's start: where
    // dom0's kernel has no clocksource its vDSO can read (Xen's, once it
    // finds the TSC unstable) each read is a system call through Xen.
    uint64_t now = now_ns();
    uint64_t last_publish = now;
    while (!stopping_ && !detached_ && !gone_) {
        evs.clear();
        bool waiting = false;
        for (auto& pd : pending_)
            waiting |= pd.valid;
        // Short waits only while a record waits for its vCPU's resume or a
        // duration trigger runs; otherwise the wake-ups come from events.
        arm_tick(now, waiting || cfg_.triggers.duration_ns ? 20 : 200);
        const int wake_fds[] = {wake_.get(), tick_.get()};
        chan_->wait(wake_fds, evs);

        // Control messages first: a start_trap precedes the accesses it allows.
        serve_ctrl_ring();
        bool any_vcpu = false;
        for (const Channel::Ev& e : evs) {
            if (e.kind == Channel::Ev::ioreq && e.vcpu < chan_->nr_vcpus) {
                serve_ioreq(e.vcpu);
                any_vcpu = true;
            } else if (e.kind == Channel::Ev::gone) {
                gone_ = true;
            }
        }
        // Nothing reported: look at every slot once, so a lost
        // notification costs a tick, never a stuck vCPU.
        if (!any_vcpu)
            for (unsigned v = 0; v < chan_->nr_vcpus; v++)
                serve_ioreq(v);
        finalize_all(false);
        serve_requests();
        producer_->pump(); // notes and counters that found the writer busy

        now = std::exchange(served_ns_, 0);
        if (!now)
            now = now_ns();
        if (session_.on_tick(now))
            transition("stop", "duration", now);
        if (now - last_publish > 200000000ull) {
            publish();
            last_publish = now;
        }
    }
    if (!detached_ && !gone_)
        drain();
    else if (detached_)
        sweep_after_detach();
    finalize_all(true);
    if (gone_) {
        log(LogLevel::error, "the %s hypervisor went away: stopping the session",
            hv_->name().c_str());
        producer_->add_event({session_ord_, "hypervisor_gone", now_ns(),
                              "the " + hv_->name() + " hypervisor's connection closed"});
        end_session("hypervisor_gone");
    } else if (detached_) {
        end_session("detached");
    } else {
        end_session(stop_cause_.load());
    }
    // Answer requests that raced with the end, then say how it went.
    serve_requests();
    bool failed_guest = detached_ && counters_.timeouts;
    bool lost = finish() != 0;
    return failed_guest || gone_ || lost ? EXIT_FAILURE : EXIT_SUCCESS;
}

void Daemon::end_session(const char* cause) {
    if (session_.state() != SessionState::stopped) {
        uint64_t now = now_ns();
        session_.apply(SessionAction::stop, now);
        transition("stop", cause, now);
    }
    publish();
}

void Daemon::publish() {
    counters_.state = to_string(session_.state());
    counters_.started_ns = session_.started_ns();
    counters_.stopped_ns = session_.stopped_ns();
    producer_->set_counters(session_ord_, counters_);
}

// After a session state change: its marker (one kind per new state, with
// what caused it) and the new state for the DB.
void Daemon::transition(const char* kind, const std::string& cause, uint64_t now) {
    if (!kind)
        kind = session_.state() == SessionState::profiling ? "start"
               : session_.state() == SessionState::stopped ? "stop"
                                                           : "pause";
    producer_->add_marker({session_ord_, kind, -1, -1, -1, now, cause, {}});
    if (session_.state() == SessionState::profiling && !pre_window_.empty())
        flush_pre_window();
    publish();
}

void Daemon::serve_ctrl_ring() {
    page_.take_ctrl(
        [this](const xen_busprof_ctrl_msg& m, const BusprofPage::Span& span) { on_ctrl(m, span); });
    uint32_t lost = page_.ctrl_lost();
    if (lost != seen_lost_) {
        producer_->add_event({session_ord_, "ctrl_lost", now_ns(),
                              std::to_string(lost - seen_lost_) +
                                  " control messages lost to a full ring; traps re-read from " +
                                  hv_->name()});
        seen_lost_ = lost;
        resync_traps();
        resync_mmio_traps();
    }
}

// Xen's trap table is the truth; after lost control messages the daemon
// reads it instead of guessing.
void Daemon::resync_traps() {
    auto q = query(*hv_, dom_.domid);
    if (!q)
        return;
    uint64_t now = now_ns();
    traps_.clear();
    for (uint32_t i = 0; i < q->nr_traps && i < XEN_BUSPROF_MAX_RANGES; i++) {
        auto r = std::make_pair(q->traps[i].first, q->traps[i].last);
        if (grant(r, now))
            traps_.push_back(r);
    }
    // A trap the daemon learns of here came with a start_trap message that
    // was lost: it starts a session that waits for one all the same.
    if (!traps_.empty() && session_.on_start_trap(now))
        transition(nullptr, "start_trap", now);
}

// Xen's memory-mapped traps (XEN_BUSPROF_query_mmio), as resync_traps().
void Daemon::resync_mmio_traps() {
    if (!page_.knows_mmio())
        return;
    xen_busprof_query_mmio q{};
    q.domid = dom_.domid;
    if (!hv_->op(XEN_BUSPROF_query_mmio, &q, sizeof(q)))
        return;
    const uint64_t now = now_ns();
    mmio_traps_.clear();
    for (uint32_t i = 0; i < q.nr_traps && i < XEN_BUSPROF_MAX_RANGES; i++) {
        auto r = std::make_pair(q.traps[i].first, q.traps[i].last);
        if (grant_mmio(r, now))
            mmio_traps_.push_back(r);
    }
    if (!mmio_traps_.empty() && session_.on_start_trap(now))
        transition(nullptr, "start_trap", now);
}

// Bus permission for a range Xen trapped, once per range and kept to the
// end; a range the bus refuses is never served (a 'refused' event says why).
bool Daemon::grant(std::pair<uint16_t, uint16_t> r, uint64_t t) {
    if (std::find(granted_.begin(), granted_.end(), r) != granted_.end())
        return true;
    if (!bus_allows([&] { bus_->grant(r.first, r.second); }, t))
        return false;
    granted_.push_back(r);
    return true;
}

// The bus maps a memory-mapped span Xen trapped, as grant() for ports.
bool Daemon::grant_mmio(std::pair<uint64_t, uint64_t> r, uint64_t t) {
    if (std::find(mmio_granted_.begin(), mmio_granted_.end(), r) != mmio_granted_.end())
        return true;
    if (!bus_allows([&] { bus_->grant_mmio(r.first, r.second); }, t))
        return false;
    mmio_granted_.push_back(r);
    return true;
}

// ask() gives the bus a range or span; a refusal is counted and recorded.
bool Daemon::bus_allows(const std::function<void()>& ask, uint64_t t) {
    try {
        ask();
        return true;
    } catch (const std::exception& e) {
        refusals_.ranges++;
        counters_.notes_dropped +=
            !producer_->add_event({session_ord_, "refused", t, e.what()}, true);
        return false;
    }
}

template <class T>
static bool covers(const std::vector<std::pair<T, T>>& rs, uint64_t addr, unsigned size) {
    for (auto [f, l] : rs)
        if (addr >= f && addr + size - 1 <= l)
            return true;
    return false;
}

static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

// Where an access went, as the events say it: "address 0x..." or "port N".
static std::string place(bool mmio, uint64_t where) {
    return mmio ? "address " + hex(where) : "port " + std::to_string(where);
}

// A memory-mapped span has its own table and bus permission; every other
// message is about ports.
void Daemon::on_ctrl(const xen_busprof_ctrl_msg& m, const BusprofPage::Span& span) {
    uint64_t t = to_ns(m.tsc);
    // dom0's trap calls (busprof trap/untrap, a revoke) name no vCPU; a
    // Xen of interface 1.0 sends zero flags, which is the guest's.
    const bool by_dom0 = m.flags & XEN_BUSPROF_CTRL_FROM_DOM0;
    const int vcpu = by_dom0 ? -1 : m.vcpu;
    const std::string origin = by_dom0 ? "dom0" : "guest";
    switch (m.kind) {
    case XEN_BUSPROF_CTRL_start_trap:
    case XEN_BUSPROF_CTRL_stop_trap:
        if (span.space == XEN_BUSPROF_SPACE_MMIO)
            on_mmio_trap_ctrl(m, span, t, vcpu, by_dom0);
        else
            on_trap_ctrl(m, t, vcpu, by_dom0);
        break;

    case XEN_BUSPROF_CTRL_extract: {
        // Everything the guest did before asking is complete: its vCPU
        // resumed from each access before it could ask.
        barrier();
        const bool mmio = span.space == XEN_BUSPROF_SPACE_MMIO;
        Marker mk{session_ord_,
                  "extract",
                  vcpu,
                  mmio ? -1 : static_cast<int>(span.first),
                  mmio ? -1 : static_cast<int>(span.last),
                  t,
                  {},
                  origin};
        mk.mmio = mmio;
        mk.addr_first = mmio ? span.first : 0;
        mk.addr_last = mmio ? span.last : 0;
        counters_.notes_dropped += !producer_->add_marker(mk, true);
        ExtractRequest x{session_ord_, dom_.domid, m};
        x.wide = m.flags & XEN_BUSPROF_CTRL_WIDE;
        x.space = span.space;
        x.first = span.first;
        x.last = span.last;
        producer_->request_extract(x);
        break;
    }

    case XEN_BUSPROF_CTRL_pause:
    case XEN_BUSPROF_CTRL_resume:
        on_guest_pause(m.kind == XEN_BUSPROF_CTRL_pause, t, vcpu, origin);
        break;

    case XEN_BUSPROF_CTRL_timeout: {
        const bool mmio = span.space == XEN_BUSPROF_SPACE_MMIO;
        counters_.timeouts++;
        producer_->add_event({session_ord_, "timeout", t,
                              "vCPU " + std::to_string(vcpu) + " access to " +
                                  place(mmio, mmio ? span.first : m.first) +
                                  " completed without the daemon"});
        if (m.vcpu < chan_->nr_vcpus)
            timed_out(m.vcpu, t);
        break;
    }

    case XEN_BUSPROF_CTRL_detach:
        if (detaching_)
            break; // drain()'s own
        // The domain is going away, or an access timed out (reported above).
        producer_->add_event({session_ord_, "detached", t,
                              counters_.timeouts
                                  ? "Xen detached the profiler after a timeout"
                                  : "Xen detached the profiler: the domain is going away"});
        log(LogLevel::info, "Xen detached the profiler from domain %s%s", dom_.name.c_str(),
            counters_.timeouts ? " after a timeout" : "");
        detached_ = true;
        break;
    }
}

// A trap call: a range trapped (granted before the marker: Xen routes
// accesses to the range from now on, and each is served with the bus
// permission in place) or no longer trapped.
void Daemon::on_trap_ctrl(const xen_busprof_ctrl_msg& m, uint64_t t, int vcpu, bool by_dom0) {
    const std::string origin = by_dom0 ? "dom0" : "guest";
    if (m.kind == XEN_BUSPROF_CTRL_start_trap) {
        auto r = std::make_pair(m.first, m.last);
        if (grant(r, t))
            traps_.push_back(r);
        counters_.notes_dropped += !producer_->add_marker(
            {session_ord_, "start_trap", vcpu, m.first, m.last, t, {}, origin}, !by_dom0);
        if (session_.on_start_trap(t))
            transition(nullptr, "start_trap", t);
        return;
    }
    barrier();
    auto it = std::find(traps_.begin(), traps_.end(), std::make_pair(m.first, m.last));
    if (it != traps_.end())
        traps_.erase(it);
    // The bus permission stays until the end: an access Xen routed
    // before the stop may still be in another vCPU's slot.
    counters_.notes_dropped += !producer_->add_marker(
        {session_ord_, "stop_trap", vcpu, m.first, m.last, t, {}, origin}, !by_dom0);
    if (traps_.empty() && mmio_traps_.empty() && session_.on_last_stop_trap(t))
        transition(nullptr, "stop_trap", t);
}

// A trap call on a memory-mapped span, as on_trap_ctrl() for ports: the
// bus maps the span before the marker, and keeps it to the end.
void Daemon::on_mmio_trap_ctrl(const xen_busprof_ctrl_msg& m, const BusprofPage::Span& span,
                               uint64_t t, int vcpu, bool by_dom0) {
    const std::string origin = by_dom0 ? "dom0" : "guest";
    const auto r = std::make_pair(span.first, span.last);
    const bool start = m.kind == XEN_BUSPROF_CTRL_start_trap;
    Marker mk{session_ord_, start ? "start_trap" : "stop_trap", vcpu, -1, -1, t, {}, origin};
    mk.mmio = true;
    mk.addr_first = span.first;
    mk.addr_last = span.last;
    if (start) {
        if (grant_mmio(r, t))
            mmio_traps_.push_back(r);
        counters_.notes_dropped += !producer_->add_marker(mk, !by_dom0);
        if (session_.on_start_trap(t))
            transition(nullptr, "start_trap", t);
        return;
    }
    barrier();
    auto it = std::find(mmio_traps_.begin(), mmio_traps_.end(), r);
    if (it != mmio_traps_.end())
        mmio_traps_.erase(it);
    counters_.notes_dropped += !producer_->add_marker(mk, !by_dom0);
    if (traps_.empty() && mmio_traps_.empty() && session_.on_last_stop_trap(t))
        transition(nullptr, "stop_trap", t);
}

// The guest's own pause of the recording.  Only a session that
// records is paused and only a paused one resumed: a guest cannot
// start a session that waits for its start trigger, nor revive a
// stopped one.  Accesses before the message were recorded; the
// ring is read before each access is served, so none after it is.
void Daemon::on_guest_pause(bool pause, uint64_t t, int vcpu, const std::string& origin) {
    SessionState from = pause ? SessionState::profiling : SessionState::paused;
    if (session_.state() != from)
        return;
    barrier();
    session_.apply(pause ? SessionAction::pause : SessionAction::resume, t);
    counters_.notes_dropped += !producer_->add_marker(
        {session_ord_, pause ? "pause" : "resume", vcpu, -1, -1, t, "guest", origin}, true);
    publish();
}

// Xen stopped waiting for vCPU v: the guest got all ones for a read and
// nothing for a write.  If the daemon already made the access, its record
// says so; if not, the request still in the slot is abandoned.
void Daemon::timed_out(unsigned v, uint64_t t) {
    Pending& pd = pending_[v];
    if (pd.valid && !page_.resumed_from(v, pd.seq)) {
        pd.r.status = XEN_BUSPROF_STATUS_TIMEOUT;
        if (pd.r.dir == XEN_BUSPROF_DIR_IN) {
            pd.r.value = pd.r.size >= 4 ? 0xffffffffu : (1u << (8 * pd.r.size)) - 1;
            if (pd.r.space == XEN_BUSPROF_SPACE_MMIO)
                pd.r.wide_value = pd.r.size == 8 ? ~uint64_t{0} : pd.r.value;
        }
        pd.r.t_resume_ns = t;
        pd.valid = false;
        settle(pd);
        return;
    }
    abandoned_[v] = true;
}

// Whether the daemon may touch the bus for this access.  Xen routed it,
// so it was trapped when the guest made it; the daemon only checks that
// the port lies in a range Xen told it of (and that it got bus access
// for), reading the control ring and then Xen's table before it says no.
bool Daemon::may_serve(unsigned port, unsigned size) {
    if (covers(granted_, port, size))
        return true;
    serve_ctrl_ring();
    if (covers(granted_, port, size))
        return true;
    resync_traps();
    return covers(granted_, port, size);
}

// The same for a memory-mapped access, against the spans Xen trapped
// (XEN_BUSPROF_query_mmio): dom0 touches no address Xen did not route.
bool Daemon::may_serve_mmio(uint64_t addr, unsigned size) {
    if (covers(mmio_granted_, addr, size))
        return true;
    serve_ctrl_ring();
    if (covers(mmio_granted_, addr, size))
        return true;
    resync_mmio_traps();
    return covers(mmio_granted_, addr, size);
}

void Daemon::serve_ioreq(unsigned v) {
    ioreq_t* p = &chan_->ioreq->vcpu_ioreq[v];
    ioreq_t req;
    if (!claim_ioreq(v, p, req))
        return;
    finalize(v, false);
    // A timeout or a detach posted before this request was taken is in
    // the ring by now: read it before touching the bus.
    serve_ctrl_ring();
    // Left in its slot when Xen detached the profiler, and named by no
    // timeout note of Xen's (that went with the detach): Xen completes it
    // without the daemon, as it did the one that timed out.
    const bool left = detached_ && !abandoned_[v];
    Access a = read_access(v, req);
    answer_access(v, p, a);
    keep_pending(v, a);
    if (left) {
        counters_.timeouts++;
        counters_.notes_dropped += !producer_->add_event(
            {session_ord_, "timeout", a.now,
             "vCPU " + std::to_string(v) + " access to " + place(a.mmio, a.mmio ? a.addr : a.port) +
                 " was in its slot when Xen detached the profiler: completed without the "
                 "daemon"},
            true);
    }
}

// Takes the request in vCPU v's slot, if one is ready, into req.  An
// invalidate, a broadcast every enabled ioreq server answers, is answered
// here: no bus access, nothing to record.
bool Daemon::claim_ioreq(unsigned v, ioreq_t* p, ioreq_t& req) {
    if (ioreq_state(p) != STATE_IOREQ_READY)
        return false;
    set_ioreq_state(p, STATE_IOREQ_INPROCESS);
    req = *p;
    if (req.type != IOREQ_TYPE_INVALIDATE)
        return true;
    set_ioreq_state(p, STATE_IORESP_READY);
    chan_->notify_vcpu(v);
    return false;
}

// The access the request asks for, and Xen's stamp of it if the stamp is
// new (Xen routed it: one stamp an access).
Daemon::Access Daemon::read_access(unsigned v, const ioreq_t& req) {
    Access a;
    a.trap = page_.trap(v);
    a.stamped = a.trap.seq != last_stamp_seq_[v];
    if (a.stamped)
        last_stamp_seq_[v] = a.trap.seq;

    a.size = req.size;
    // A memory-mapped access comes as Xen's emulator sends it: type COPY,
    // one element (rep movs/stos come an element at a time), 1 to 8 bytes.
    a.mmio = req.type == IOREQ_TYPE_COPY;
    a.addr = req.addr;
    a.port = a.mmio ? 0 : static_cast<unsigned>(req.addr);
    a.type = req.type;
    a.count = req.count;
    a.write = req.dir == IOREQ_WRITE;
    a.valid = (req.type == IOREQ_TYPE_PIO || a.mmio) && req.count == 1 && !req.data_is_ptr &&
              (a.size == 1 || a.size == 2 || a.size == 4 || (a.mmio && a.size == 8));
    a.mask = !a.valid      ? (a.mmio ? ~uint64_t{0} : 0xffffffffu)
             : a.size == 8 ? ~uint64_t{0}
                           : (uint64_t{1} << (8 * a.size)) - 1;
    a.value = a.write ? req.data & a.mask : 0;
    a.abandoned = abandoned_[v] || detached_;
    abandoned_[v] = false;
    return a;
}

// The bus access's start: t0, and with the TSC clock the TSC read just
// before it, against which the trap's stamp is converted (trap_ns()).
void Daemon::begin_bus(Access& a) {
    a.tsc0 = tsc_clock_ ? read_tsc() : 0;
    a.t0 = now_ns();
}

// Performs the access on the bus (or refuses it) and answers the vCPU.
void Daemon::answer_access(unsigned v, ioreq_t* p, Access& a) {
    // From here to the notify, busprof's storage work does not begin: on a
    // CPU it shares with this thread it would be in the access's times.
    struct Inside {
        AccessGate& gate;
        bool in = true;
        void leave() {
            if (std::exchange(in, false))
                gate.leave();
        }
        ~Inside() { leave(); } // a notify that throws
    } inside{producer_->gate()};
    inside.gate.enter();

    if (a.abandoned) {
        // Xen completed it already (all ones for a read): the device must
        // not see an access the guest has moved on from.
        a.status = XEN_BUSPROF_STATUS_TIMEOUT;
        if (!a.write)
            a.value = a.mask;
    } else if (a.valid && !a.mmio && may_serve(a.port, a.size)) {
        uint32_t value = static_cast<uint32_t>(a.value);
        begin_bus(a);
        bus_->access(static_cast<uint16_t>(a.port), a.size, a.write, &value);
        a.t1 = now_ns();
        a.value = value;
    } else if (a.valid && a.mmio && may_serve_mmio(a.addr, a.size)) {
        // The bus maps every span it was granted: one it could not map was
        // never granted, and may_serve_mmio() said no.
        begin_bus(a);
        bus_->mmio(a.addr, a.size, a.write, &a.value);
        a.t1 = now_ns();
    } else {
        a.value = a.mask;
        a.status = XEN_BUSPROF_STATUS_ERROR;
        refusals_.accesses++;
        counters_.notes_dropped += !producer_->add_event(
            {session_ord_, "refused", now_ns(),
             "vCPU " + std::to_string(v) + " ioreq type " + std::to_string(a.type) + " " +
                 place(a.mmio, a.mmio ? a.addr : a.port) + " size " + std::to_string(a.size) +
                 " count " + std::to_string(a.count) + " not served"},
            true);
    }
    if (!a.write)
        p->data = a.value;
    set_ioreq_state(p, STATE_IORESP_READY);
    chan_->notify_vcpu(v);
    // The bus access's end is the time of what follows (a trigger's
    // marker, the session's start or stop): no third read of the clock.
    a.now = a.t1 ? a.t1 : now_ns();
    served_ns_ = a.now;
    inside.leave();
}

// The access's record, pending until its vCPU resumes, and what it
// triggers.
void Daemon::keep_pending(unsigned v, const Access& a) {
    Pending& pd = pending_[v];
    pd.valid = true;
    pd.seq = a.trap.seq;
    pd.served = ++served_count_;
    pd.r = Record{};
    pd.r.session_id = session_ord_;
    pd.r.domid = dom_.domid;
    pd.r.vcpu = static_cast<uint16_t>(v);
    pd.r.port = static_cast<uint16_t>(a.port);
    pd.r.size = static_cast<uint8_t>(a.size);
    pd.r.dir = a.write ? XEN_BUSPROF_DIR_OUT : XEN_BUSPROF_DIR_IN;
    pd.r.status = a.status;
    pd.r.value = static_cast<uint32_t>(a.value & a.mask);
    pd.r.space = a.mmio ? XEN_BUSPROF_SPACE_MMIO : XEN_BUSPROF_SPACE_PIO;
    pd.r.addr = a.mmio ? a.addr : 0;
    pd.r.wide_value = a.mmio ? a.value & a.mask : 0;
    pd.r.rip = a.stamped ? a.trap.rip : 0;
    // A Xen of interface 1.0 leaves who[] as zeros: not known then.
    pd.r.who_known = a.stamped && page_.says_who();
    pd.r.task = pd.r.who_known ? a.trap.task : 0;
    pd.r.pcpu = pd.r.who_known ? a.trap.pcpu : 0;
    pd.r.t_trap_ns = a.stamped ? trap_ns(a) : (a.t0 ? a.t0 : a.now);
    pd.r.t_bus_begin_ns = a.t0;
    pd.r.t_bus_end_ns = a.t1;
    const uint64_t now = a.now;
    if (session_.on_access(pd.r, now))
        transition(nullptr, cfg_.triggers.start_text(), now);
    pd.record = session_.recording();
    pd.pre =
        !pd.record && cfg_.triggers.pre_trigger && session_.state() == SessionState::configured;
    if (!pd.record)
        counters_.unrecorded++;
    if (pd.record && session_.on_access_recorded(pd.r, now))
        transition(nullptr, "on:" + cfg_.triggers.stop_on->text, now);
    if (a.abandoned) {
        // No resume will come for it.
        pd.r.t_resume_ns = now;
        pd.valid = false;
        settle(pd);
    }
}

void Daemon::queue_record(Record r) {
    // Stored as measured, and flagged: a profiler does not correct what it
    // cannot vouch for.
    if (uint64_t c = clock_contradiction(r)) {
        r.flags |= XEN_BUSPROF_RECORD_CLOCK_SKEWED;
        if (c > counters_.clock_skew_ns) {
            counters_.clock_skew_ns = c;
            publish();
        }
    }
    if (!producer_->push(r)) {
        counters_.dropped++;
        if (!queue_full_reported_)
            counters_.notes_dropped += !producer_->add_event(
                {session_ord_, "queue_full", now_ns(),
                 "record queue full: transactions dropped (see sessions.dropped)"},
                true);
        queue_full_reported_ = true;
        return;
    }
    queue_full_reported_ = false;
    // The time matters only to a session a record count ends.
    if (cfg_.triggers.stop_after_records) {
        uint64_t now = now_ns();
        if (session_.on_recorded(now))
            transition(nullptr, "records:" + std::to_string(cfg_.triggers.stop_after_records), now);
    } else {
        session_.on_recorded(0);
    }
}

void Daemon::finalize(unsigned v, bool force) {
    Pending& pd = pending_[v];
    if (!pd.valid)
        return;
    if (page_.resumed_from(v, pd.seq)) {
        pd.r.t_resume_ns = to_ns(page_.resume_tsc(v));
    } else if (force) {
        // The daemon ends before the vCPU resumed: the guest got the
        // answer (it is in the slot); only the resume time is unknown.
        pd.r.t_resume_ns = pd.r.t_bus_end_ns ? pd.r.t_bus_end_ns : now_ns();
    } else {
        return;
    }
    pd.valid = false;
    settle(pd);
}

// A record is whole when its vCPU resumed, and vCPUs resume in their own
// time: one served later may resume first (an access's vCPU exits its
// wait after the daemon's turn has looked at the page).  So a whole record
// waits here for those served before it, and ids keep the order of
// service across vCPUs.  The wait is bounded: a vCPU kept from resuming
// (paused by a debugger) holds the others' records at most kSettledMax
// records long, and a guest's extract, stop_trap or pause (barrier())
// takes every whole record with it.
void Daemon::settle(const Pending& pd) {
    auto at = std::find_if(settled_.rbegin(), settled_.rend(),
                           [&](const Pending& s) { return s.served < pd.served; });
    settled_.insert(at.base(), pd);
    release_settled(settled_.size() > kSettledMax);
}

// Queues the whole records served before every access still pending, or
// all of them.
void Daemon::release_settled(bool all) {
    uint64_t open = UINT64_MAX;
    if (!all)
        for (const Pending& p : pending_)
            if (p.valid)
                open = std::min(open, p.served);
    size_t n = 0;
    while (n < settled_.size() && settled_[n].served < open)
        complete(settled_[n++]);
    settled_.erase(settled_.begin(), settled_.begin() + static_cast<ptrdiff_t>(n));
}

// A served access whose record is whole: queued if the session records it,
// kept in the pre-trigger window if it was served before the start.
void Daemon::complete(const Pending& pd) {
    if (pd.record) {
        queue_record(pd.r);
        return;
    }
    if (!pd.pre)
        return;
    Record r = pd.r;
    r.flags |= XEN_BUSPROF_RECORD_PRE_TRIGGER;
    if (session_.recording() && r.session_id == session_ord_) {
        // Served before the start, whole only after it.
        counters_.unrecorded--;
        queue_record(r);
        return;
    }
    pre_window_.push_back(r);
    if (pre_window_.size() > cfg_.triggers.pre_trigger)
        pre_window_.pop_front();
}

// The session started: the pre-trigger window goes into it.
void Daemon::flush_pre_window() {
    for (auto& r : pre_window_)
        if (r.session_id == session_ord_) {
            counters_.unrecorded--;
            queue_record(r);
        }
    pre_window_.clear();
}

void Daemon::finalize_all(bool force) {
    for (unsigned v = 0; v < pending_.size(); v++)
        finalize(v, force);
}

// Before a guest's extract, stop_trap or pause: what its vCPU did before
// is whole (the vCPU resumed from each access before it could ask) and
// goes to the writer, even past an access of another vCPU that has not
// resumed yet.
void Daemon::barrier() {
    finalize_all(false);
    release_settled(true);
}

// Xen detached the profiler, after a timeout or as the domain goes, and
// the turn that saw it served only the vCPUs whose events it had.  Another
// vCPU's request may still be in its slot: Xen routed it before the detach
// and completes it without the daemon (all ones for a read, a lost write)
// once its wait is over, as it did the one that timed out, or when the
// server goes.  Each is served as such (serve_ioreq()): recorded as timed
// out, said in an event, the bus left alone.
void Daemon::sweep_after_detach() {
    for (unsigned v = 0; v < chan_->nr_vcpus; v++)
        serve_ioreq(v);
}

// The daemon stops while the guest may be in the middle of an access.
// Leaving with a request in a slot would let the guest see what no device
// answered (all ones, a lost write) once the server goes.  So: detach,
// after which Xen routes nothing more here, and serve, for real and
// recorded, every access it routed before: each is counted in its vCPU's
// stamp slot (the core stamps with the routing decision), so the daemon
// knows when it has them all.  Xen stamps no resume after the detach: these
// records end at their bus access.  Bounded by the guest's own wait bound;
// what is still missing then is said in a timeout event.
void Daemon::drain() {
    detaching_ = true;
    chan_->detach();
    std::vector<uint64_t> routed(chan_->nr_vcpus);
    for (unsigned v = 0; v < chan_->nr_vcpus; v++)
        routed[v] = page_.routed(v);
    const uint64_t until = now_ns() + static_cast<uint64_t>(cfg_.timeout_ms) * 1000000u;
    std::vector<Channel::Ev> evs;
    for (;;) {
        serve_ctrl_ring();
        unsigned missing = 0;
        for (unsigned v = 0; v < chan_->nr_vcpus; v++) {
            serve_ioreq(v);
            missing += last_stamp_seq_[v] != routed[v];
        }
        if (!missing)
            break;
        uint64_t now = now_ns();
        if (now >= until) {
            counters_.notes_dropped += !producer_->add_event(
                {session_ord_, "timeout", now,
                 std::to_string(missing) + " vCPUs' accesses routed before the stop never "
                                           "reached the daemon's ioreq server"},
                true);
            break;
        }
        arm_tick(now, 1);
        evs.clear();
        const int wake_fds[] = {wake_.get(), tick_.get()};
        chan_->wait(wake_fds, evs);
        for (const Channel::Ev& e : evs)
            gone_ |= e.kind == Channel::Ev::gone;
        if (gone_)
            break; // its requests went with it
    }
}

// ---------------------------------------------------------------- control

// Control thread: the session belongs to the ioreq thread, so the request
// goes there and the answer comes back; flush waits on the writer here.
std::string Daemon::control(const std::string& line) {
    ControlCommand cmd;
    try {
        cmd = parse_control_request(line);
    } catch (const UserError& e) {
        return control_err(e.what(), e.hint());
    }
    if (cmd == ControlCommand::flush) {
        // In steps, so that a writer that cannot write (another connection
        // holds the DB's lock, a full disk: it retries every 100 ms) is
        // told at once, not after a wait that holds this socket's other
        // clients (a stop, a status, busprof top's frames) as long.  The
        // records waited for are those queued now: a guest that goes on
        // meanwhile must not keep moving the end.
        const Writer::FlushMark mark = writer_->request_flush();
        for (int waited = 0;; waited += 100) {
            if (writer_->flushed(mark, 100))
                return control_ok();
            std::string err = writer_->last_error();
            if (!err.empty() || waited >= 10000)
                return control_err("the trace DB cannot be written: " +
                                   (err.empty() ? std::string("not written within 10 s") : err));
        }
    }
    auto req = std::make_shared<Request>();
    req->cmd = cmd;
    auto answer = req->reply.get_future();
    {
        std::lock_guard lk(req_mu_);
        requests_.push_back(req);
    }
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
    if (answer.wait_for(std::chrono::seconds(2)) != std::future_status::ready)
        return control_err("the daemon did not answer within 2 s");
    std::string reply = answer.get();
    // The session's row id is the writer's to give.
    auto at = reply.find("{session}");
    if (at != std::string::npos)
        reply.replace(at, 9, std::to_string(session_id(2000)));
    return reply;
}

// On every turn of the loop: allocates nothing when no request waits
// (the two vectors trade their buffers).
void Daemon::serve_requests() {
    {
        std::lock_guard lk(req_mu_);
        if (requests_.empty())
            return;
        serving_.swap(requests_);
    }
    for (auto& r : serving_)
        r->reply.set_value(handle(r->cmd));
    serving_.clear();
}

std::string Daemon::handle(ControlCommand cmd) {
    uint64_t now = now_ns();
    try {
        if (cmd == ControlCommand::status) {
            using std::to_string;
            return control_ok(status_line(
                {{"session", "{session}"},
                 {"domain", dom_.name},
                 {"domid", to_string(dom_.domid)},
                 {"state", busprof::to_string(session_.state())},
                 {"recorded", to_string(writer_->committed(session_ord_))},
                 {"dropped", to_string(counters_.dropped)},
                 {"unrecorded", to_string(counters_.unrecorded)},
                 {"timeouts", to_string(counters_.timeouts)},
                 {"traps", to_string(traps_.size())},
                 {"mmio_traps", to_string(mmio_traps_.size())},
                 {"queue",
                  to_string(writer_->queued()) + "/" + to_string(writer_->queue_capacity())},
                 {"refused", to_string(refusals_.accesses)},
                 {"ranges_refused", to_string(refusals_.ranges)},
                 {"notes_dropped", to_string(counters_.notes_dropped)},
                 {"extract_errors", to_string(extract_errors_->load())},
                 {"clients_refused", to_string(control_ ? control_->clients_refused() : 0)},
                 {"db", writer_->path()}}));
        }
        static const std::pair<ControlCommand, SessionAction> actions[] = {
            {ControlCommand::pause, SessionAction::pause},
            {ControlCommand::resume, SessionAction::resume},
            {ControlCommand::stop, SessionAction::stop},
            {ControlCommand::rearm, SessionAction::rearm}};
        for (auto [c, a] : actions) {
            if (cmd != c)
                continue;
            const char* name = to_string(cmd);
            SessionState before = session_.state();
            if (a == SessionAction::rearm)
                publish(); // the stopped session's last counters
            session_.apply(a, now);
            if (a == SessionAction::rearm) {
                // The stopped session keeps its row; the new one gets its own.
                counters_ = {};
                refusals_ = {};
                *extract_errors_ = 0;
                begin_session(now);
            } else {
                const char* kind = a == SessionAction::resume && before == SessionState::configured
                                       ? "start"
                                       : name;
                transition(kind, "user", now);
            }
            return control_ok("session {session} is " + std::string(to_string(session_.state())));
        }
        return control_err(std::string("the daemon cannot ") + to_string(cmd));
    } catch (const UserError& e) {
        return control_err(e.what(), e.hint());
    }
}

} // namespace busprof
