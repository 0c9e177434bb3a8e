// SPDX-License-Identifier: GPL-2.0-only
#include "error.h"
#include "hv.h"
#include "machine.h"
#include "seqpacket.h"

extern "C" {
#include "sim-proto.h"
}

#include <algorithm>
#include <cstring>
#include <mutex>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <utility>

namespace busprof {

namespace {

class SimConn {
  public:
    explicit SimConn(const std::string& path) : path_(path) {
        try {
            sock_ = seqpacket_connect(path);
        } catch (const SystemError& e) {
            throw UserError("cannot reach the simulated hypervisor at " + path + " (" + e.what() +
                                ")",
                            "start it with 'busprof-simxen --socket " + path +
                                " --domain ...', or use 'busprof demo'");
        }
        bp_sim_msg m{};
        m.type = BP_SIM_HELLO;
        m.role = BP_SIM_ROLE_DOM0;
        call(m);
        if (m.rc < 0)
            throw SystemError("simulated hypervisor refused dom0 hello", -m.rc);
    }

    // The machine's devices, for the sim bus: what the hypervisor passes
    // through and what the profiler performs must be the same hardware.
    std::shared_ptr<sim::Machine> acquire_machine() {
        std::vector<FD> fds;
        bp_sim_msg m{};
        m.type = BP_SIM_ACQUIRE_MACHINE;
        call(m, nullptr, 0, &fds);
        if (m.rc < 0 || fds.size() != 1)
            throw SystemError("mapping the simulated machine", m.rc < 0 ? -m.rc : EPROTO);
        return std::make_shared<sim::Machine>(std::move(fds[0]));
    }

    // Sends m (+records), replaces m by the reply; fds received go to fds.
    // m.nr says how many records `bytes` holds (sim-proto.h).
    void call(bp_sim_msg& m, const void* recs = nullptr, size_t bytes = 0,
              std::vector<FD>* fds = nullptr) {
        std::lock_guard lk(mu_);
        m.version = BP_SIM_VERSION;
        std::vector<uint8_t> buf(sizeof(m) + bytes);
        std::memcpy(buf.data(), &m, sizeof(m));
        if (bytes)
            std::memcpy(buf.data() + sizeof(m), recs, bytes);
        send_msg(sock_.get(), buf.data(), buf.size());
        size_t n = recv_msg(sock_.get(), buf.data(), buf.size(), fds);
        if (n < sizeof(m))
            throw SystemError("simulated hypervisor at " + path_ + " went away", ECONNRESET);
        std::memcpy(&m, buf.data(), sizeof(m));
    }

    int fd() const { return sock_.get(); }

  private:
    std::string path_;
    FD sock_;
    std::mutex mu_;
};

void* map_fd(const FD& fd, size_t size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED)
        throw_errno("mmap");
    return p;
}

class SimChannel : public Channel {
    // What an epoll event names: a vCPU by its number, or one of these
    // (kWake + i: the caller's i-th wake descriptor).
    static constexpr uint32_t kRing = 0xffffff00u, kConn = kRing + 1, kWake = kRing + 2;

    void watch(int fd, uint32_t events, uint32_t what) {
        epoll_event e{};
        e.events = events;
        e.data.u32 = what;
        if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) < 0)
            throw_errno("epoll_ctl");
    }

  public:
    SimChannel(std::shared_ptr<SimConn> conn, uint16_t domid)
        : conn_(std::move(conn)), domid_(domid) {}
    ~SimChannel() override {
        detach();
        if (ioreq)
            ::munmap(ioreq, 4096);
        if (page)
            ::munmap(page, 4096);
    }

    // Only a channel that attached may detach: a failed second daemon
    // must not take the profiler away from the first.
    void detach() override {
        if (!std::exchange(attached_, false))
            return;
        xen_busprof_domain d{};
        d.domid = domid_;
        bp_sim_msg m{};
        m.type = BP_SIM_HYPERCALL;
        m.cmd = XEN_BUSPROF_detach;
        std::memcpy(m.arg, &d, sizeof(d));
        try {
            conn_->call(m);
        } catch (const std::exception&) {
        }
    }

    bool attached_ = false;

    // One epoll set, made at the first wait: each wait costs the same
    // however many vCPUs there are, and names the vCPUs whose event came.
    // The connection to the simulator is watched for its end only (no
    // events asked: EPOLLHUP/EPOLLERR); replies are read by call().
    void wait(std::span<const int> wake_fds, std::vector<Ev>& out) override {
        if (!epoll_) {
            epoll_ = FD(::epoll_create1(EPOLL_CLOEXEC));
            if (!epoll_)
                throw_errno("epoll_create1");
            watch(ctrl_.get(), EPOLLIN, kRing);
            for (unsigned v = 0; v < to_dm_.size(); v++)
                watch(to_dm_[v].get(), EPOLLIN, v);
            wake_fds_.assign(wake_fds.begin(), wake_fds.end());
            for (uint32_t i = 0; i < wake_fds_.size(); i++)
                watch(wake_fds_[i], EPOLLIN, kWake + i);
            watch(conn_->fd(), 0, kConn);
            ready_.resize(to_dm_.size() + wake_fds_.size() + 2);
        } else if (!std::equal(wake_fds.begin(), wake_fds.end(), wake_fds_.begin(),
                               wake_fds_.end())) {
            // The set is made once; a caller that changed its descriptors
            // would wait on the old ones.
            throw SystemError("the wake descriptors of a channel's waits changed", EINVAL);
        }
        int n = ::epoll_wait(epoll_.get(), ready_.data(), static_cast<int>(ready_.size()), -1);
        uint64_t cnt;
        for (int i = 0; i < n; i++) {
            uint32_t what = ready_[i].data.u32;
            if (what == kRing) {
                (void)!::read(ctrl_.get(), &cnt, sizeof(cnt));
                out.push_back({Ev::ring, 0});
            } else if (what >= kWake && what - kWake < wake_fds_.size()) {
                (void)!::read(wake_fds_[what - kWake], &cnt, sizeof(cnt));
            } else if (what == kConn) {
                out.push_back({Ev::gone, 0});
            } else if (what < to_dm_.size()) {
                (void)!::read(to_dm_[what].get(), &cnt, sizeof(cnt));
                out.push_back({Ev::ioreq, what});
            }
        }
    }

    void notify_vcpu(unsigned v) override {
        uint64_t one = 1;
        (void)!::write(from_dm_[v].get(), &one, sizeof(one));
    }

    std::shared_ptr<SimConn> conn_;
    uint16_t domid_;
    FD ioreq_fd_, page_fd_, ctrl_, epoll_;
    std::vector<int> wake_fds_;
    std::vector<epoll_event> ready_;
    std::vector<FD> to_dm_, from_dm_;
};

class SimHypervisorClient : public Hypervisor {
  public:
    explicit SimHypervisorClient(const std::string& socket)
        : socket_(socket), conn_(std::make_shared<SimConn>(socket)) {}

    std::string name() const override { return "sim"; }

    // A connection of its own: a call on it never waits for one of this
    // handle's (SimConn's lock).
    std::unique_ptr<Hypervisor> reopen() override {
        return std::make_unique<SimHypervisorClient>(socket_);
    }

    std::shared_ptr<sim::Machine> simulated_machine() override {
        if (!machine_)
            machine_ = conn_->acquire_machine();
        return machine_;
    }

    DomainInfo lookup(const std::string& dom) override {
        bp_sim_msg m{};
        m.type = BP_SIM_LOOKUP_DOMAIN;
        char* end = nullptr;
        unsigned long id = std::strtoul(dom.c_str(), &end, 0);
        if (!dom.empty() && *end == '\0')
            m.domid = static_cast<uint16_t>(id);
        else
            std::strncpy(m.name, dom.c_str(), sizeof(m.name) - 1);
        conn_->call(m);
        if (m.rc < 0)
            throw UserError("no domain '" + dom + "'",
                            "list the simulated domains with busprof-simxen's --domain options");
        return {m.domid, std::string(m.name, strnlen(m.name, sizeof(m.name))), m.nr_vcpus};
    }

    Status op(unsigned cmd, void* arg, size_t size, const void* records, size_t bytes) override {
        bp_sim_msg m{};
        m.type = BP_SIM_HYPERCALL;
        m.cmd = cmd;
        if (size > sizeof(m.arg))
            return Errno(EINVAL);
        std::memcpy(m.arg, arg, size);
        if (cmd == XEN_BUSPROF_extract_reply && size >= sizeof(xen_busprof_extract_reply))
            m.nr = static_cast<const xen_busprof_extract_reply*>(arg)->nr;
        conn_->call(m, records, bytes);
        if (m.rc == 0)
            std::memcpy(arg, m.arg, size);
        return status_of(m.rc);
    }

    std::unique_ptr<Channel> attach(const DomainInfo& d, unsigned timeout_ms) override {
        auto ch = std::make_unique<SimChannel>(conn_, d.domid);
        std::vector<FD> fds;
        bp_sim_msg m{};
        m.type = BP_SIM_CREATE_IOREQ_SERVER;
        m.domid = d.domid;
        conn_->call(m, nullptr, 0, &fds);
        if (m.rc == -EEXIST)
            throw UserError("cannot create an ioreq server for domain " + d.name +
                                ": it has one (EEXIST)",
                            "another busprof daemon profiles it already");
        if (m.rc < 0)
            throw SystemError("creating an ioreq server for domain " + d.name, -m.rc);
        if (fds.size() != 1 + 2u * m.nr_vcpus)
            throw SystemError("ioreq server: wrong number of descriptors", EPROTO);
        ch->nr_vcpus = m.nr_vcpus;
        ch->ioreq_fd_ = std::move(fds[0]);
        ch->ioreq = static_cast<shared_iopage_t*>(map_fd(ch->ioreq_fd_, 4096));
        for (unsigned v = 0; v < m.nr_vcpus; v++) {
            ch->to_dm_.push_back(std::move(fds[1 + 2 * v]));
            ch->from_dm_.push_back(std::move(fds[2 + 2 * v]));
        }

        xen_busprof_attach a{};
        a.domid = d.domid;
        a.ioservid = m.ioservid;
        a.version = kProfilerInterface;
        a.timeout_ms = timeout_ms;
        if (Status st = op(XEN_BUSPROF_attach, &a, sizeof(a), nullptr, 0); !st)
            throw UserError("cannot attach to domain " + d.name + ": " + st.error().message(),
                            st.error() == EBUSY ? "another busprof daemon profiles it already"
                                                : "");
        ch->attached_ = true;

        fds.clear();
        m = {};
        m.type = BP_SIM_ACQUIRE_PAGE;
        m.domid = d.domid;
        conn_->call(m, nullptr, 0, &fds);
        if (m.rc < 0 || fds.size() != 1)
            throw SystemError("mapping the busprof page", m.rc < 0 ? -m.rc : EPROTO);
        ch->page_fd_ = std::move(fds[0]);
        ch->page = static_cast<xen_busprof_page*>(map_fd(ch->page_fd_, 4096));

        fds.clear();
        m = {};
        m.type = BP_SIM_BIND_EVTCHN;
        m.domid = d.domid;
        m.port = a.ctrl_port;
        conn_->call(m, nullptr, 0, &fds);
        if (m.rc < 0 || fds.size() != 1)
            throw SystemError("binding the control event channel", m.rc < 0 ? -m.rc : EPROTO);
        ch->ctrl_ = std::move(fds[0]);
        return ch;
    }

  private:
    std::string socket_;
    std::shared_ptr<SimConn> conn_;
    std::shared_ptr<sim::Machine> machine_;
};

} // namespace

std::unique_ptr<Hypervisor> make_sim_hypervisor(const std::string& socket) {
    return std::make_unique<SimHypervisorClient>(socket);
}

} // namespace busprof
