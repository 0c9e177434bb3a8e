#include "daemon.h"

#include "clock.h"
#include "error.h"
#include "seqpacket.h"

#include <cstdio>
#include <cstring>
#include <poll.h>
#include <sstream>
#include <sys/eventfd.h>
#include <sys/socket.h>

namespace busprof {


Daemon::Daemon(DaemonConfig cfg) : cfg_(std::move(cfg)), session_(cfg_.triggers) {
    if (cfg_.domain.empty())
        throw UserError("no domain given", "name the guest to profile: busprof daemon DOMAIN");
    if (cfg_.bus == "sim")
        bus_ = make_sim_bus(cfg_.sim_bus);
    else if (cfg_.bus == "port")
        bus_ = make_port_bus();
    else
        throw UserError("unknown bus '" + cfg_.bus + "'", "use --bus sim or --bus port");

    writer_ = std::make_unique<Writer>(cfg_.db, cfg_.queue_capacity);
    reader_ = std::make_unique<Db>(Db::open(cfg_.db, false));
    hv_ = make_hypervisor(cfg_.backend, cfg_.sim_socket);
    dom_ = hv_->lookup(cfg_.domain);
    chan_ = hv_->attach(dom_, cfg_.timeout_ms);
    // Xen refuses to attach to more; the stamp slots below rely on it.
    if (chan_->nr_vcpus > XEN_BUSPROF_MAX_VCPUS)
        throw SystemError("attach reported " + std::to_string(chan_->nr_vcpus) + " vCPUs", EPROTO);
    pending_.resize(chan_->nr_vcpus);
    for (unsigned v = 0; v < chan_->nr_vcpus; v++)
        last_stamp_seq_[v] = chan_->page->stamp[v].seq;
    seen_lost_ = chan_->page->ctrl_lost;
    if (!(chan_->page->flags & XEN_BUSPROF_PAGE_CLOCK_MONOTONIC))
        calibrate_clock();

    SessionRow row{dom_.domid, dom_.name, hv_->name(), bus_->name(),
                   to_string(session_.state()), cfg_.triggers.start_text(),
                   cfg_.triggers.stop_text(), now_ns()};
    session_id_ = writer_->create_session(row);

    wake_ = FD(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!cfg_.control_socket.empty()) {
        FD s;
        try {
            s = unix_listen(cfg_.control_socket, SOCK_STREAM);
        } catch (const SystemError& e) {
            throw UserError("cannot listen on " + cfg_.control_socket + ": " + std::strerror(e.err()),
                            "does its directory exist? choose another with --socket");
        }
        control_listen_ = std::move(s);
        control_thread_ = std::thread([this] { serve_control(); });
    }
}

Daemon::~Daemon() {
    stop();
    if (control_thread_.joinable())
        control_thread_.join();
    if (!cfg_.control_socket.empty())
        ::unlink(cfg_.control_socket.c_str());
    finalize_all(true);
    {
        std::lock_guard<std::recursive_mutex> lk(mu_);
        if (session_.state() != SessionState::stopped) {
            session_.apply(SessionAction::stop, now_ns());
            state_changed("stop", now_ns());
        }
        sync_session();
    }
    chan_.reset(); // detach before the last flush
    writer_.reset();
}

// Where the stamp clock's 0 lies on CLOCK_MONOTONIC: bracket a query that
// reads it and keep the tightest of a few tries.  Xen stamps its system
// time, which dom0's CLOCK_MONOTONIC follows at the same rate, so one
// offset holds for the whole session.
void Daemon::calibrate_clock() {
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 16; i++) {
        xen_busprof_query q{};
        q.domid = dom_.domid;
        uint64_t a = now_ns();
        long rc = hv_->op(XEN_BUSPROF_query, &q, sizeof(q));
        uint64_t b = now_ns();
        if (rc < 0)
            throw SystemError("reading Xen's clock (XEN_BUSPROF_query)", static_cast<int>(-rc));
        if (b - a < best) {
            best = b - a;
            tsc_offset_ = static_cast<int64_t>(a + (b - a) / 2) -
                          static_cast<int64_t>(stamp_ns(q.now));
        }
    }
    std::fprintf(stderr, "busprof: Xen clock offset %lld ns, +/- %llu ns\n",
                 static_cast<long long>(tsc_offset_), static_cast<unsigned long long>(best / 2));
}

void Daemon::stop() {
    stopping_ = true;
    uint64_t one = 1;
    if (wake_)
        (void)!::write(wake_.get(), &one, sizeof(one));
}

// The stamp clock in ns, on its own time line.
uint64_t Daemon::stamp_ns(uint64_t tsc) const {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(tsc) * 1000000 /
                                 chan_->page->tsc_khz);
}

// The stamp clock on CLOCK_MONOTONIC.
uint64_t Daemon::to_ns(uint64_t tsc) const {
    if (chan_->page->flags & XEN_BUSPROF_PAGE_CLOCK_MONOTONIC)
        return tsc;
    return static_cast<uint64_t>(static_cast<int64_t>(stamp_ns(tsc)) + tsc_offset_);
}

bool Daemon::trapped(unsigned port, unsigned size) const {
    for (auto [f, l] : traps_)
        if (port >= f && port + size - 1 <= l)
            return true;
    return false;
}

bool Daemon::run() {
    std::vector<Channel::Ev> evs;
    uint64_t last_sync = now_ns();
    while (!stopping_ && !detached_) {
        evs.clear();
        chan_->wait(20, wake_.get(), evs);
        // Control messages first: a start_trap precedes the accesses it allows.
        process_ctrl();
        for (unsigned v = 0; v < chan_->nr_vcpus; v++)
            handle_ioreq(v);
        finalize_all(false);
        uint64_t now = now_ns();
        std::lock_guard<std::recursive_mutex> lk(mu_);
        if (session_.on_tick(now))
            state_changed("stop", now);
        if (now - last_sync > 500000000ull) {
            sync_session();
            last_sync = now;
        }
    }
    // Detached after a timeout: the daemon failed its guest.
    return !(detached_ && timeouts_);
}

void Daemon::process_ctrl() {
    xen_busprof_page* pg = chan_->page;
    uint32_t prod = __atomic_load_n(&pg->ctrl_prod, __ATOMIC_ACQUIRE);
    uint32_t cons = pg->ctrl_cons;
    if (prod - cons > XEN_BUSPROF_CTRL_RING_SIZE)
        cons = prod - XEN_BUSPROF_CTRL_RING_SIZE;
    while (cons != prod) {
        xen_busprof_ctrl_msg m = pg->ring[cons % XEN_BUSPROF_CTRL_RING_SIZE];
        cons++;
        __atomic_store_n(&pg->ctrl_cons, cons, __ATOMIC_RELEASE);
        handle_ctrl(m);
    }
    uint64_t now = now_ns();
    if (pg->ctrl_lost != seen_lost_) {
        writer_->add_event({session_id_, "ctrl_lost", now,
                            std::to_string(pg->ctrl_lost - seen_lost_) +
                                " control messages lost to a full ring"});
        seen_lost_ = pg->ctrl_lost;
    }
}

void Daemon::handle_ctrl(const xen_busprof_ctrl_msg& m) {
    uint64_t t = to_ns(m.tsc);
    std::lock_guard<std::recursive_mutex> lk(mu_);
    switch (m.kind) {
    case XEN_BUSPROF_CTRL_start_trap:
        traps_.push_back({m.first, m.last});
        try {
            bus_->grant(m.first, m.last);
        } catch (const std::exception& e) {
            writer_->add_event({session_id_, "refused", t, e.what()});
        }
        writer_->add_marker({session_id_, "start_trap", m.vcpu, m.first, m.last, t});
        if (session_.on_start_trap(t))
            state_changed(nullptr, t);
        break;

    case XEN_BUSPROF_CTRL_stop_trap:
        finalize_all(false);
        for (auto it = traps_.begin(); it != traps_.end(); ++it)
            if (it->first == m.first && it->second == m.last) {
                traps_.erase(it);
                break;
            }
        bus_->revoke(m.first, m.last);
        writer_->add_marker({session_id_, "stop_trap", m.vcpu, m.first, m.last, t});
        if (traps_.empty() && session_.on_last_stop_trap(t))
            state_changed(nullptr, t);
        break;

    case XEN_BUSPROF_CTRL_extract:
        writer_->add_marker({session_id_, "extract", m.vcpu, m.first, m.last, t});
        answer_extract(m);
        break;

    case XEN_BUSPROF_CTRL_timeout:
        timeouts_++;
        writer_->add_event({session_id_, "timeout", t,
                            "vCPU " + std::to_string(m.vcpu) + " access to port " +
                                std::to_string(m.first) + " completed without the daemon"});
        break;

    case XEN_BUSPROF_CTRL_detach:
        // The domain is going away, or an access timed out (reported above).
        writer_->add_event({session_id_, "detached", t,
                            timeouts_ ? "Xen detached the profiler after a timeout"
                                      : "Xen detached the profiler: the domain is going away"});
        std::fprintf(stderr, "busprof: Xen detached the profiler from domain %s%s\n",
                     dom_.name.c_str(), timeouts_ ? " after a timeout" : "");
        detached_ = true;
        break;
    }
}

void Daemon::answer_extract(const xen_busprof_ctrl_msg& m) {
    // Everything the guest did before asking must be in the DB: its vCPU
    // resumed from each access before it could ask, so those are complete.
    finalize_all(false);
    xen_busprof_extract_reply rep{};
    rep.domid = dom_.domid;
    rep.request = m.seq;
    std::vector<xen_busprof_record> recs;
    if (!writer_->flush()) {
        rep.status = -EIO;
    } else {
        try {
            int64_t snapshot = static_cast<int64_t>(m.snapshot);
            if (!snapshot) {
                Stmt s(reader_->get(), "SELECT COALESCE(MAX(id), 0) FROM transactions"
                                       " WHERE session_id = ?");
                s.bind(1, session_id_);
                s.step();
                snapshot = sqlite3_column_int64(s.get(), 0);
            }
            const char* where = " FROM transactions WHERE session_id = ?1 AND domid = ?2"
                                " AND port BETWEEN ?3 AND ?4 AND id <= ?5";
            Stmt c(reader_->get(), std::string("SELECT count(*)") + where);
            c.bind(1, session_id_).bind(2, dom_.domid).bind(3, m.first).bind(4, m.last);
            c.bind(5, snapshot);
            c.step();
            rep.total = static_cast<uint64_t>(sqlite3_column_int64(c.get(), 0));
            rep.snapshot = static_cast<uint64_t>(snapshot);
            Stmt q(reader_->get(),
                   std::string("SELECT id, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
                               " t_resume_ns, value, port, vcpu, size, dir, status") +
                       where + " ORDER BY id LIMIT ?6 OFFSET ?7");
            q.bind(1, session_id_).bind(2, dom_.domid).bind(3, m.first).bind(4, m.last);
            q.bind(5, snapshot).bind(6, m.nr).bind(7, static_cast<int64_t>(m.offset));
            while (q.step()) {
                xen_busprof_record r{};
                auto col = [&](int i) { return sqlite3_column_int64(q.get(), i); };
                r.id = col(0);
                r.rip = col(1);
                r.t_trap_ns = col(2);
                r.t_bus_begin_ns = col(3);
                r.t_bus_end_ns = col(4);
                r.t_resume_ns = col(5);
                r.value = static_cast<uint32_t>(col(6));
                r.port = static_cast<uint16_t>(col(7));
                r.vcpu = static_cast<uint16_t>(col(8));
                r.size = static_cast<uint8_t>(col(9));
                r.dir = dir_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 10)));
                r.status =
                    status_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 11)));
                recs.push_back(r);
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "busprof: error: extract query: %s\n", e.what());
            recs.clear();
            rep.status = -EIO;
        }
    }
    rep.nr = static_cast<uint32_t>(recs.size());
    long rc = hv_->op(XEN_BUSPROF_extract_reply, &rep, sizeof(rep), recs.data(), recs.size());
    if (rc < 0)
        std::fprintf(stderr, "busprof: warning: extract reply refused: %s\n", op_error(rc).c_str());
}

void Daemon::handle_ioreq(unsigned v) {
    ioreq_t* p = &chan_->ioreq->vcpu_ioreq[v];
    if (static_cast<volatile ioreq_t*>(p)->state != STATE_IOREQ_READY)
        return;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    p->state = STATE_IOREQ_INPROCESS;
    ioreq_t req = *p;

    if (req.type == IOREQ_TYPE_INVALIDATE) {
        // A broadcast every enabled ioreq server answers; no bus access.
        __atomic_thread_fence(__ATOMIC_RELEASE);
        p->state = STATE_IORESP_READY;
        chan_->notify_vcpu(v);
        return;
    }

    finalize(v, false);

    const xen_busprof_stamp& st = chan_->page->stamp[v];
    uint64_t seq = st.seq, rip = st.rip, tsc_trap = st.tsc_trap;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    bool stamped = seq != last_stamp_seq_[v];
    if (stamped)
        last_stamp_seq_[v] = seq;

    unsigned size = req.size;
    unsigned port = static_cast<unsigned>(req.addr);
    bool write = req.dir == IOREQ_WRITE;
    uint32_t mask = size >= 4 ? 0xffffffffu : (1u << (8 * size)) - 1;
    uint32_t value = write ? static_cast<uint32_t>(req.data) & mask : 0;
    uint8_t status = XEN_BUSPROF_STATUS_OK;
    uint64_t t0, t1;

    // Touch only what the guest trapped: Xen checked it may use these ports.
    if (req.type == IOREQ_TYPE_PIO && req.count == 1 && !req.data_is_ptr &&
        (size == 1 || size == 2 || size == 4) && trapped(port, size)) {
        t0 = now_ns();
        bus_->access(static_cast<uint16_t>(port), size, write, &value);
        t1 = now_ns();
    } else {
        t0 = t1 = now_ns();
        value = mask;
        status = XEN_BUSPROF_STATUS_ERROR;
        writer_->add_event({session_id_, "refused", t0,
                            "vCPU " + std::to_string(v) + " ioreq type " +
                                std::to_string(req.type) + " port " + std::to_string(port) +
                                " size " + std::to_string(size) + " count " +
                                std::to_string(req.count) + " not served"});
    }
    if (!write)
        p->data = value;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    p->state = STATE_IORESP_READY;
    chan_->notify_vcpu(v);

    Pending& pd = pending_[v];
    pd.valid = true;
    pd.seq = seq;
    pd.r = Record{};
    pd.r.domid = dom_.domid;
    pd.r.vcpu = static_cast<uint16_t>(v);
    pd.r.port = static_cast<uint16_t>(port);
    pd.r.size = static_cast<uint8_t>(size);
    pd.r.dir = write ? XEN_BUSPROF_DIR_OUT : XEN_BUSPROF_DIR_IN;
    pd.r.status = status;
    pd.r.value = value & mask;
    pd.r.rip = stamped ? rip : 0;
    pd.r.t_trap_ns = stamped ? to_ns(tsc_trap) : t0;
    pd.r.t_bus_begin_ns = t0;
    pd.r.t_bus_end_ns = t1;
    std::lock_guard<std::recursive_mutex> lk(mu_);
    uint64_t now = now_ns();
    if (session_.on_access(now))
        state_changed(nullptr, now);
    pd.record = session_.recording();
    pd.r.session_id = session_id_;
    if (!pd.record)
        unrecorded_++;
}

void Daemon::finalize(unsigned v, bool force) {
    Pending& pd = pending_[v];
    if (!pd.valid)
        return;
    const xen_busprof_stamp& st = chan_->page->stamp[v];
    uint64_t resume_seq = __atomic_load_n(&st.resume_seq, __ATOMIC_ACQUIRE);
    if (resume_seq == pd.seq) {
        pd.r.t_resume_ns = to_ns(st.tsc_resume);
    } else if (force) {
        // The resume was never seen (Xen timed the access out, or we stop).
        pd.r.t_resume_ns = pd.r.t_bus_end_ns;
        pd.r.status = XEN_BUSPROF_STATUS_TIMEOUT;
    } else {
        return;
    }
    pd.valid = false;
    if (!pd.record)
        return;
    if (!writer_->push(pd.r)) {
        if (!queue_full_reported_)
            writer_->add_event({pd.r.session_id, "queue_full", now_ns(),
                                "record queue full: transactions dropped (see sessions.dropped)"});
        queue_full_reported_ = true;
        return;
    }
    queue_full_reported_ = false;
    std::lock_guard<std::recursive_mutex> lk(mu_);
    uint64_t now = now_ns();
    if (session_.on_recorded(now))
        state_changed(nullptr, now);
}

void Daemon::finalize_all(bool force) {
    for (unsigned v = 0; v < pending_.size(); v++)
        finalize(v, force);
}

void Daemon::state_changed(const char* marker, uint64_t now) {
    if (marker)
        writer_->add_marker({session_id_, marker, -1, -1, -1, now});
    sync_session();
}

void Daemon::sync_session() {
    writer_->update_session(session_id_, to_string(session_.state()), session_.started_ns(),
                            session_.stopped_ns(), timeouts_, unrecorded_);
}

// ---------------------------------------------------------------- control

std::string Daemon::control(const std::string& line) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    uint64_t now = now_ns();
    std::lock_guard<std::recursive_mutex> lk(mu_);
    try {
        if (cmd == "status") {
            std::ostringstream o;
            o << "session " << session_id_ << " domain " << dom_.name << " domid " << dom_.domid
              << " state " << to_string(session_.state()) << " recorded "
              << writer_->committed() << " dropped " << writer_->dropped() << " unrecorded "
              << unrecorded_ << " timeouts " << timeouts_ << " traps " << traps_.size()
              << " db " << writer_->path() << "\nOK\n";
            return o.str();
        }
        static const std::pair<const char*, SessionAction> actions[] = {
            {"pause", SessionAction::pause},
            {"resume", SessionAction::resume},
            {"stop", SessionAction::stop},
            {"rearm", SessionAction::rearm}};
        for (auto [name, a] : actions) {
            if (cmd != name)
                continue;
            session_.apply(a, now);
            if (a == SessionAction::rearm) {
                // The stopped session keeps its row; the new one gets its own.
                SessionRow row{dom_.domid, dom_.name, hv_->name(), bus_->name(),
                               to_string(session_.state()), cfg_.triggers.start_text(),
                               cfg_.triggers.stop_text(), now};
                session_id_ = writer_->create_session(row);
                unrecorded_ = timeouts_ = 0;
                sync_session();
            } else {
                state_changed(name, now);
            }
            return "session " + std::to_string(session_id_) + " is " +
                   to_string(session_.state()) + "\nOK\n";
        }
        if (cmd == "flush")
            return writer_->flush() ? "OK\n" : "ERR the trace DB cannot be written: " +
                                                   writer_->last_error() + "\n";
        return "ERR unknown command '" + cmd + "'\n";
    } catch (const UserError& e) {
        return std::string("ERR ") + e.what() + (e.hint().empty() ? "" : "\nHINT " + e.hint()) +
               "\n";
    }
}

void Daemon::serve_control() {
    while (!stopping_) {
        pollfd p[2] = {{control_listen_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
        if (::poll(p, 2, 200) <= 0 || !(p[0].revents & POLLIN))
            continue;
        FD c(::accept4(control_listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!c)
            continue;
        timeval tv{2, 0};
        ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        std::string line;
        char ch;
        while (line.size() < 256 && ::read(c.get(), &ch, 1) == 1 && ch != '\n')
            line += ch;
        std::string reply = control(line);
        (void)!::write(c.get(), reply.data(), reply.size());
    }
}

} // namespace busprof
