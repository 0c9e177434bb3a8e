// SPDX-License-Identifier: GPL-2.0-only
#include "simxen.h"

#include "error.h"
#include "ioreq_slot.h"
#include "seqpacket.h"

extern "C" {
#include "sim-proto.h"
#include <xen/busprof.h>
#include <xen/hvm/ioreq.h>
}

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

namespace busprof::sim {

// ---------------------------------------------------------------- parsing

DomainConfig parse_domain_config(const std::string& text) {
    static const char* const kGrammar = "use DOMID:NAME:PORTS[:VCPUS][:iomem=RANGES], e.g. "
                                        "1:demo:0x3f8-0x3ff:2:iomem=0xfebf0000-0xfecfffff";
    std::vector<std::string> f;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ':'))
        f.push_back(item);
    DomainConfig c;
    // The device memory, last and named, so that VCPUS stays optional.
    if (f.size() >= 4 && f.back().rfind("iomem=", 0) == 0) {
        c.iomem = parse_mmio_ranges(f.back().substr(6));
        f.pop_back();
    }
    if (f.size() < 3 || f.size() > 4)
        throw UserError("malformed domain '" + text + "'", kGrammar);
    auto number = [&](const std::string& s, const char* what) {
        size_t used = 0;
        unsigned long v = 0;
        try {
            v = std::stoul(s, &used, 0);
        } catch (const std::exception&) {
            used = 0;
        }
        if (s.empty() || used != s.size() || s[0] == '-')
            throw UserError(std::string("malformed ") + what + " '" + s + "' in '" + text + "'",
                            kGrammar);
        return v;
    };
    unsigned long id = number(f[0], "domain id");
    if (id == 0 || id >= 0x7ff0)
        throw UserError("domain id " + f[0] + " out of range", "guests have ids 1..32751");
    c.domid = static_cast<uint16_t>(id);
    c.name = f[1];
    if (c.name.empty() || c.name.size() >= 32)
        throw UserError("bad domain name in '" + text + "'", "1 to 31 characters");
    c.ioports = parse_port_ranges(f[2]);
    unsigned long vcpus = f.size() == 4 ? number(f[3], "vCPU count") : c.vcpus;
    if (vcpus == 0 || vcpus > 64)
        throw UserError("bad vCPU count in '" + text + "'", "1..64 vCPUs");
    c.vcpus = static_cast<unsigned>(vcpus);
    return c;
}

// ---------------------------------------------------------------- state

struct SimHypervisor::Conn {
    int id;
    FD sock;
    // The domain whose socket it came in on (nullptr: dom0's socket).  A
    // guest connection is bound to it, whatever its HELLO says.
    Domain* socket_dom = nullptr;
    int role = 0;
    Domain* dom = nullptr; // guest connections
    unsigned vcpu = 0;
};

// A vCPU's wait_deadline while the timer thread wakes it, and after.
constexpr s_time_t kTimerFiring = -1, kTimerFired = -2;

struct IoreqServer {
    int owner = 0; // the dom0 connection that created it
    FD ioreq_fd;
    shared_iopage_t* ioreq = nullptr;
    // Per vCPU.  A vCPU waits in a blocking read() of its from_dm, which
    // the profiler's notify, kick() and the timer thread write.
    std::vector<FD> to_dm, from_dm;
    ~IoreqServer() {
        if (ioreq)
            ::munmap(ioreq, 4096);
    }
    // Wakes every vCPU that waits on it.
    void kick() const {
        uint64_t one = 1;
        for (auto& f : from_dm)
            (void)!::write(f.get(), &one, sizeof(one));
    }
};

struct SimHypervisor::Domain {
    SimHypervisor* sim = nullptr; // the one it belongs to: the host hooks find it here
    struct domain d {};
    std::vector<struct vcpu> vcpus;
    DomainConfig cfg;
    busprof_rangeset ioports{};
    busprof_rangeset iomem{}; // cfg.iomem, for the core's checks
    // The pages whose direct mapping a trap removed (Xen's p2m entries
    // made invalid), by gfn.  Its own lock: the host hooks run under the
    // core's, which never waits for mu's holders but may for this.
    std::mutex p2m_mu;
    std::vector<uint64_t> unmapped; // p2m_mu, sorted
    std::mutex mu;                  // everything below
    std::vector<bool> vcpu_used;
    // The profiler's ioreq server (at most one, id 0).  A vCPU whose access
    // waits on it holds a reference, so its page and event descriptors stay
    // the ones it waits on even when the profiler goes and a next one comes.
    std::shared_ptr<IoreqServer> server;
    // Per vCPU: when its access's wait for the profiler ends (NOW()
    // units; 0: not waiting, kTimerFiring/kTimerFired: the timer thread
    // is waking it / woke it), and the eventfd it waits on then (the
    // server's from_dm, open while the vCPU waits).  Made with the domain.
    std::unique_ptr<std::atomic<s_time_t>[]> wait_deadline;
    std::unique_ptr<std::atomic<int>[]> wait_fd;
    // The wait bound of the domain's last wait (0: none yet), for the
    // timer thread, which does not call into the hypervisor core.
    std::atomic<unsigned> wait_bound_ms{0};
    // The busprof page, handed out as Xen would by XENMEM_acquire_resource.
    FD page_fd;
    // Xen-bound event channels, by port; port 0 is never used, as in Xen.
    std::vector<FD> evtchn{1};
};

static SimHypervisor::Domain* host_of(const struct domain* d) {
    return static_cast<SimHypervisor::Domain*>(d->host);
}

static FD make_memfd(const char* name, size_t size, void** map) {
    FD fd(::memfd_create(name, MFD_CLOEXEC));
    if (!fd)
        throw_errno("memfd_create");
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) < 0)
        throw_errno("ftruncate");
    *map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (*map == MAP_FAILED)
        throw_errno("mmap");
    return fd;
}

static FD make_eventfd(int flags = EFD_NONBLOCK) {
    FD fd(::eventfd(0, EFD_CLOEXEC | flags));
    if (!fd)
        throw_errno("eventfd");
    return fd;
}

// Stamp clock skew (set_stamp_skew): how far the clock of the CPUs that run
// guest vCPUs is ahead of dom0's.
static std::atomic<int64_t> g_stamp_skew_ns{0};

// The vCPU whose work the hypervisor core does now on this simulated CPU,
// as Xen's per-CPU `current` names it (a connection's thread is the CPU its
// vCPU runs on).  The stamp clock is that CPU's: a guest's CPU runs ahead
// by the skew, dom0's does not.  Set explicitly around each call into the
// core for a vCPU (RunningOn): the core's clock hook takes no vCPU, and
// code that runs for none (dom0's hypervisor-side work) reads dom0's clock.
static thread_local const struct vcpu* t_current = nullptr;

class RunningOn {
  public:
    explicit RunningOn(const struct vcpu* v) : was_(std::exchange(t_current, v)) {}
    ~RunningOn() { t_current = was_; }
    RunningOn(const RunningOn&) = delete;
    RunningOn& operator=(const RunningOn&) = delete;

  private:
    const struct vcpu* was_;
};

static int64_t stamp_skew_of_current() {
    const struct vcpu* v = t_current;
    return v && v->domain->domain_id != 0 ? g_stamp_skew_ns.load() : 0;
}

} // namespace busprof::sim

using busprof::sim::host_of;
using busprof::sim::SimHypervisor;

// ---------------------------------------------------------------- host hooks

extern "C" {

struct domain* busprof_host_get_target(struct domain* caller, domid_t domid, int* rc) {
    if (caller->domain_id != 0) {
        *rc = -EPERM;
        return nullptr;
    }
    if (auto* dom = host_of(caller)->sim->find(domid))
        return &dom->d;
    *rc = -ESRCH;
    return nullptr;
}

void busprof_host_put_target(struct domain*) {}

bool busprof_host_ioports_permitted(const struct domain* d, unsigned int first, unsigned int last) {
    return busprof_ranges_covers(&host_of(d)->ioports, first, last);
}

// MMIO (interface 1.3).  The domain's iomem pages are mapped 1:1; those
// inside the machine's edu BAR are its direct mapping of device memory,
// any other page of iomem is not device memory (-EXDEV).  The p2m is the
// list of unmapped pages: an access to one of them comes to mmio() as a
// fault, the others reach the device directly.
bool busprof_host_is_hvm(const struct domain*) {
    return true;
}
bool busprof_host_iomem_permitted(const struct domain* d, uint64_t gfn, uint64_t nr) {
    return nr && busprof_ranges_covers(&host_of(d)->iomem, gfn << XEN_BUSPROF_MMIO_PAGE_SHIFT,
                                       ((gfn + nr) << XEN_BUSPROF_MMIO_PAGE_SHIFT) - 1);
}
bool busprof_host_mmio_direct(const struct domain* d, uint64_t gfn, uint64_t nr) {
    const uint64_t first = gfn << XEN_BUSPROF_MMIO_PAGE_SHIFT;
    const uint64_t end = (gfn + nr) << XEN_BUSPROF_MMIO_PAGE_SHIFT;
    return busprof_host_iomem_permitted(d, gfn, nr) && first >= busprof::sim::kEduBase &&
           end <= busprof::sim::kEduBase + busprof::sim::kEduSize;
}
int busprof_host_mmio_unmap(struct domain* d, uint64_t gfn, unsigned int nr, unsigned int* done) {
    auto* dom = host_of(d);
    std::lock_guard lk(dom->p2m_mu);
    *done = 0;
    for (unsigned i = 0; i < nr; i++) {
        auto at = std::lower_bound(dom->unmapped.begin(), dom->unmapped.end(), gfn + i);
        // The core never unmaps a page twice; a host that did would lose
        // the frame it must restore.
        if ((at != dom->unmapped.end() && *at == gfn + i) ||
            !busprof_host_mmio_direct(d, gfn + i, 1))
            return -EXDEV;
        dom->unmapped.insert(at, gfn + i);
        ++*done;
    }
    return 0;
}
void busprof_host_mmio_restore(struct domain* d, uint64_t gfn, unsigned int nr) {
    auto* dom = host_of(d);
    std::lock_guard lk(dom->p2m_mu);
    std::erase_if(dom->unmapped, [&](uint64_t g) { return g >= gfn && g - gfn < nr; });
}

// The simulator's one ioreq server has id 0 and is dom0's.
int busprof_host_server_ready(struct domain* d, uint16_t ioservid, domid_t profiler) {
    auto* dom = host_of(d);
    std::lock_guard lk(dom->mu);
    return dom->server && ioservid == 0 && profiler == 0 ? 0 : -ENXIO;
}

struct xen_busprof_page* busprof_host_page_alloc(struct domain* d) {
    void* map = nullptr;
    try {
        static_assert(sizeof(struct xen_busprof_page) <= 4096);
        auto fd = busprof::sim::make_memfd("busprof-page", 4096, &map);
        std::lock_guard lk(host_of(d)->mu);
        host_of(d)->page_fd = std::move(fd);
    } catch (const std::exception&) {
        return nullptr;
    }
    return static_cast<struct xen_busprof_page*>(map);
}

void busprof_host_page_free(struct domain* d, struct xen_busprof_page* pg) {
    ::munmap(pg, 4096);
    std::lock_guard lk(host_of(d)->mu);
    host_of(d)->page_fd.reset();
}

int busprof_host_evtchn_alloc(struct domain* d, domid_t) {
    try {
        auto& ports = host_of(d)->evtchn;
        std::lock_guard lk(host_of(d)->mu);
        size_t port = 1; // reuse a freed port, as Xen does
        while (port < ports.size() && ports[port])
            port++;
        if (port == ports.size())
            ports.emplace_back();
        ports[port] = busprof::sim::make_eventfd();
        return static_cast<int>(port);
    } catch (const std::exception&) {
        return -ENOMEM;
    }
}

void busprof_host_evtchn_notify(struct domain* d, unsigned int port) {
    std::lock_guard lk(host_of(d)->mu);
    if (port < host_of(d)->evtchn.size() && host_of(d)->evtchn[port]) {
        uint64_t one = 1;
        (void)!::write(host_of(d)->evtchn[port].get(), &one, sizeof(one));
    }
}

void busprof_host_evtchn_free(struct domain* d, unsigned int port) {
    std::lock_guard lk(host_of(d)->mu);
    if (port > 0 && port < host_of(d)->evtchn.size())
        host_of(d)->evtchn[port].reset();
}

// The stamp clock: CLOCK_MONOTONIC in ns, as dom0's.  With a skew, the
// guests' CPUs run ahead by it and the page no longer says the clock is
// dom0's, so that the profiler relates the two as it must on Xen.
uint64_t busprof_host_tsc(void) {
    return static_cast<uint64_t>(NOW() + busprof::sim::stamp_skew_of_current());
}
uint32_t busprof_host_tsc_khz(void) {
    return 1000000;
}
uint32_t busprof_host_clock_flags(void) {
    return busprof::sim::g_stamp_skew_ns.load() ? 0 : XEN_BUSPROF_PAGE_CLOCK_MONOTONIC;
}

} // extern "C"

namespace busprof::sim {

// ---------------------------------------------------------------- server

SimHypervisor::SimHypervisor(std::string socket_path, std::vector<DomainConfig> domains)
    : socket_path_(std::move(socket_path)) {
    for (auto& cfg : domains) {
        for (auto& other : domains_)
            if (other->cfg.domid == cfg.domid || other->cfg.name == cfg.name)
                throw UserError("domain " + cfg.name + " configured twice");
        auto dom = std::make_unique<Domain>();
        dom->sim = this;
        dom->cfg = cfg;
        dom->d.domain_id = cfg.domid;
        dom->d.max_vcpus = cfg.vcpus;
        dom->d.host = dom.get();
        dom->vcpus.resize(cfg.vcpus);
        for (unsigned i = 0; i < cfg.vcpus; i++)
            dom->vcpus[i] = {i, 0, &dom->d};
        dom->vcpu_used.assign(cfg.vcpus, false);
        dom->wait_deadline = std::make_unique<std::atomic<s_time_t>[]>(cfg.vcpus);
        dom->wait_fd = std::make_unique<std::atomic<int>[]>(cfg.vcpus);
        for (auto r : cfg.ioports)
            if (busprof_ranges_add(&dom->ioports, r.first, r.last, true))
                throw UserError("too many I/O port ranges for domain " + cfg.name);
        for (auto r : cfg.iomem)
            if (busprof_spans_add(&dom->iomem, r.first, r.last, true))
                throw UserError("too many iomem ranges for domain " + cfg.name,
                                "give it at most " + std::to_string(XEN_BUSPROF_MAX_RANGES));
        domains_.push_back(std::move(dom));
    }
    dom0_ = std::make_unique<Domain>();
    dom0_->sim = this;
    dom0_->d.domain_id = 0;
    dom0_->d.max_vcpus = 1;
    dom0_->d.host = dom0_.get();
    dom0_->vcpus.push_back({0, 0, &dom0_->d});
    wake_ = make_eventfd();

    // Only this user (and root, which ignores modes) may connect: the
    // sockets are the way to act as dom0 or as a guest.  The mask also
    // covers the moment between bind() and listen().
    mode_t old_mask = ::umask(0177);
    try {
        // dom0's socket last: once it appears, every socket is there.
        for (auto& dom : domains_)
            guest_listen_.emplace_back(seqpacket_listen(domain_socket_path(dom->cfg.domid)),
                                       dom.get());
        listen_ = seqpacket_listen(socket_path_);
    } catch (...) {
        ::umask(old_mask);
        throw;
    }
    ::umask(old_mask);
    timer_ = std::thread([this] { run_timers(); });
}

// Wakes the vCPUs whose deadline is past; the earliest deadline to come,
// if before next.
s_time_t SimHypervisor::scan_timers(s_time_t now, s_time_t next) {
    for (auto& dom : domains_)
        for (unsigned v = 0; v < dom->cfg.vcpus; v++) {
            std::atomic<s_time_t>& slot = dom->wait_deadline[v];
            s_time_t due = slot.load();
            if (due <= 0)
                continue;
            if (due > now) {
                next = std::min(next, due);
                continue;
            }
            // Claimed first: the vCPU does not end its wait (and release
            // the descriptor) while the write is under way.
            if (slot.compare_exchange_strong(due, kTimerFiring)) {
                uint64_t one = 1;
                (void)!::write(dom->wait_fd[v].load(), &one, sizeof(one));
                slot.store(kTimerFired);
            }
        }
    return next;
}

// A deadline is now + the domain's wait bound when its vCPU begins to
// wait.  So the thread sleeps until the earliest deadline it saw, or one
// shortest wait bound (of the domains' last waits, at most 1 s) from now,
// whichever is first: no deadline of a vCPU that begins to wait meanwhile
// is earlier, unless its bound is shorter than any before, and then that
// vCPU wakes the thread.  It wakes about once a wait bound, not once an
// access.
void SimHypervisor::run_timers() {
    std::unique_lock lk(timer_mu_);
    while (!stopping_) {
        s_time_t now = NOW();
        unsigned shortest = 1000;
        for (auto& dom : domains_)
            if (unsigned ms = dom->wait_bound_ms.load(std::memory_order_relaxed))
                shortest = std::min(shortest, ms);
        s_time_t next = scan_timers(now, now + MILLISECS(shortest));
        // A vCPU stores its deadline and then reads timer_next_, this
        // thread the other way round (both sequentially consistent): one
        // of them sees the other's store.
        timer_next_ = next;
        next = scan_timers(now, next);
        timer_next_ = next;
        auto until = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next));
        timer_cv_.wait_until(lk, until, [this] { return timer_woken_ || stopping_; });
        timer_woken_ = false;
    }
}

// A vCPU's deadline comes before the timer thread's next look.
void SimHypervisor::wake_timers() {
    std::lock_guard lk(timer_mu_);
    timer_woken_ = true;
    timer_cv_.notify_one();
}

void SimHypervisor::set_stamp_skew(int64_t ns) {
    g_stamp_skew_ns = ns;
}

std::string SimHypervisor::domain_socket_path(uint16_t domid) const {
    return socket_path_ + ".dom" + std::to_string(domid);
}

SimHypervisor::~SimHypervisor() {
    stop();
    std::vector<Worker> threads;
    {
        std::lock_guard lk(threads_mu_);
        threads.swap(threads_);
        shut_down(threads);
        // Also when run() never ran or ended by an exception.
        kick_servers();
    }
    for (auto& t : threads)
        if (t.thread.joinable())
            t.thread.join();
    if (timer_.joinable())
        timer_.join();
    for (auto& dom : domains_)
        busprof_domain_destroy(&dom->d);
    ::unlink(socket_path_.c_str());
    for (auto& [fd, dom] : guest_listen_)
        ::unlink(domain_socket_path(dom->cfg.domid).c_str());
}

void SimHypervisor::stop() {
    stopping_ = true;
    uint64_t one = 1;
    if (wake_)
        (void)!::write(wake_.get(), &one, sizeof(one));
    // Called from threads only (busprof-simxen's signals are taken by
    // sigwait()), so the timer thread's lock may be taken here.
    std::lock_guard lk(timer_mu_);
    timer_cv_.notify_one();
}

std::vector<uint64_t> SimHypervisor::unmapped_pages(uint16_t domid) {
    Domain* dom = find(domid);
    if (!dom)
        return {};
    std::lock_guard lk(dom->p2m_mu);
    return dom->unmapped;
}

SimHypervisor::Domain* SimHypervisor::find(uint16_t domid) {
    for (auto& d : domains_)
        if (d->cfg.domid == domid)
            return d.get();
    return nullptr;
}

SimHypervisor::Domain* SimHypervisor::find(const std::string& name) {
    for (auto& d : domains_)
        if (d->cfg.name == name)
            return d.get();
    return nullptr;
}

void SimHypervisor::run() {
    while (!stopping_) {
        std::vector<pollfd> p;
        p.push_back({wake_.get(), POLLIN, 0});
        p.push_back({listen_.get(), POLLIN, 0});
        for (auto& [fd, dom] : guest_listen_)
            p.push_back({fd.get(), POLLIN, 0});
        if (::poll(p.data(), p.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            throw_errno("poll");
        }
        if (stopping_)
            break;
        if (p[1].revents & POLLIN)
            accept_conn(listen_.get(), nullptr);
        for (size_t i = 0; i < guest_listen_.size(); i++)
            if (p[i + 2].revents & POLLIN)
                accept_conn(guest_listen_[i].first.get(), guest_listen_[i].second);
    }
    // Unblock every connection thread: one waiting for a message, and one
    // whose vCPU waits for the profiler.
    std::lock_guard lk(threads_mu_);
    shut_down(threads_);
    kick_servers();
}

// A vCPU that waits for a profiler waits on the current server's (one whose
// server went was woken then); stopping_ makes it give up.
void SimHypervisor::kick_servers() {
    for (auto& dom : domains_) {
        std::lock_guard dl(dom->mu);
        if (dom->server)
            dom->server->kick();
    }
}

// threads_mu_ held: a thread closes its socket under it, so the number
// shut down here is still that connection's.
void SimHypervisor::shut_down(const std::vector<Worker>& workers) {
    for (auto& w : workers)
        if (w.conn->sock)
            ::shutdown(w.conn->sock.get(), SHUT_RDWR);
}

void SimHypervisor::reap_finished() {
    std::vector<Worker> done;
    {
        std::lock_guard lk(threads_mu_);
        for (auto it = threads_.begin(); it != threads_.end();)
            if (it->done->load()) {
                done.push_back(std::move(*it));
                it = threads_.erase(it);
            } else {
                ++it;
            }
    }
    for (auto& w : done)
        w.thread.join();
}

void SimHypervisor::accept_conn(int listen_fd, Domain* dom) {
    reap_finished();
    FD s(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!s)
        return;
    // The socket's mode keeps others out; the peer check holds even if
    // someone loosened it.
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
        (cred.uid != 0 && cred.uid != ::geteuid()))
        return;
    auto c = std::make_shared<Conn>();
    c->id = next_conn_id_++;
    c->sock = std::move(s);
    c->socket_dom = dom;
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lk(threads_mu_);
    // A connection accepted after the stop is shut down by no one.
    if (stopping_)
        return;
    threads_.push_back({std::thread([this, c, done] {
                            serve(c);
                            *done = true;
                        }),
                        done, c});
}

void SimHypervisor::serve(std::shared_ptr<Conn> c) {
    std::vector<uint8_t> buf(sizeof(bp_sim_msg) +
                             XEN_BUSPROF_EXTRACT_MAX * sizeof(xen_busprof_record_ext));
    while (!stopping_) {
        size_t n;
        try {
            n = recv_msg(c->sock.get(), buf.data(), buf.size());
        } catch (const SystemError&) {
            break;
        }
        if (n == 0)
            break;
        bp_sim_msg m{};
        if (n < sizeof(m)) {
            // A malformed message is answered, never trusted.
            m.type = 0;
            m.rc = -EINVAL;
            try {
                send_msg(c->sock.get(), &m, sizeof(m));
            } catch (const SystemError&) {
                break;
            }
            continue;
        }
        std::memcpy(&m, buf.data(), sizeof(m));
        std::vector<uint8_t> payload(buf.begin() + sizeof(m), buf.begin() + n);
        try {
            handle(*c, m, payload);
        } catch (const SystemError&) {
            break;
        }
    }
    drop_conn(*c);
    // Closed only now, so that a guest that waits for the close (a thread
    // that exits, bp_close) finds its vCPU free for the next connection.
    std::lock_guard lk(threads_mu_);
    c->sock.reset();
}

void SimHypervisor::drop_conn(Conn& c) {
    if (c.role == BP_SIM_ROLE_GUEST && c.dom) {
        std::lock_guard lk(c.dom->mu);
        c.dom->vcpu_used[c.vcpu] = false;
        return;
    }
    if (c.role != BP_SIM_ROLE_DOM0)
        return;
    // The profiler went away: detach it from every domain it served and
    // complete pending accesses, as Xen's timeout would.
    for (auto& dom : domains_) {
        bool owned;
        {
            std::lock_guard lk(dom->mu);
            owned = dom->server && dom->server->owner == c.id;
        }
        if (!owned)
            continue;
        busprof_detach_domain(&dom->d);
        std::lock_guard lk(dom->mu);
        if (dom->server && dom->server->owner == c.id) {
            dom->server->kick();
            dom->server.reset();
        }
    }
}

// Descriptors a reply passes go as copies taken under the lock that guards
// the originals: another thread may close an original (and the number be
// reused) before the reply goes out.
static void pass(std::vector<FD>& fds, int fd) {
    FD copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!copy)
        throw_errno("fcntl(F_DUPFD_CLOEXEC)");
    fds.push_back(std::move(copy));
}

void SimHypervisor::handle(Conn& c, const bp_sim_msg& m, const std::vector<uint8_t>& payload) {
    bp_sim_msg r = m;
    r.rc = 0;
    r.nr = 0;
    std::vector<uint8_t> out;
    std::vector<FD> fds;

    if (m.version != BP_SIM_VERSION || (m.type != BP_SIM_HELLO && !c.role)) {
        r.rc = -EPROTO;
        send_msg(c.sock.get(), &r, sizeof(r));
        return;
    }
    switch (m.type) {
    case BP_SIM_HELLO:
        hello(c, m, r);
        break;
    case BP_SIM_HYPERCALL:
        hypercall(c, m, payload, r, out);
        break;
    case BP_SIM_PIO:
        if (c.role != BP_SIM_ROLE_GUEST)
            r.rc = -EPERM;
        else
            pio(c, r, m.nr);
        break;
    case BP_SIM_MMIO:
        if (c.role != BP_SIM_ROLE_GUEST)
            r.rc = -EPERM;
        else
            mmio(c, r, m.nr);
        break;
    case BP_SIM_ACQUIRE_MACHINE:
        if (c.role != BP_SIM_ROLE_DOM0)
            r.rc = -EPERM;
        else
            pass(fds, machine_.fd());
        break;
    case BP_SIM_LOOKUP_DOMAIN:
        lookup_domain(c, m, r);
        break;
    case BP_SIM_CREATE_IOREQ_SERVER:
        create_ioreq_server(c, m, r, fds);
        break;
    case BP_SIM_ACQUIRE_PAGE:
    case BP_SIM_BIND_EVTCHN:
        hand_out(c, m, r, fds);
        break;
    default:
        r.rc = -EOPNOTSUPP;
    }
    reply(c, r, out, fds);
}

void SimHypervisor::reply(Conn& c, const bp_sim_msg& r, const std::vector<uint8_t>& out,
                          const std::vector<FD>& fds) {
    if (out.empty() && fds.empty()) {
        // A guest's access and most calls: nothing to allocate.
        send_msg(c.sock.get(), &r, sizeof(r));
        return;
    }
    std::vector<uint8_t> msg(sizeof(r) + out.size());
    std::memcpy(msg.data(), &r, sizeof(r));
    if (!out.empty())
        std::memcpy(msg.data() + sizeof(r), out.data(), out.size());
    std::vector<int> raw;
    for (auto& f : fds)
        raw.push_back(f.get());
    send_msg(c.sock.get(), msg.data(), msg.size(), raw);
}

void SimHypervisor::hello(Conn& c, const bp_sim_msg& m, bp_sim_msg& r) {
    if (c.role) {
        r.rc = -EALREADY;
    } else if (m.role == BP_SIM_ROLE_DOM0) {
        // dom0 only on dom0's socket: a guest cannot promote itself.
        if (c.socket_dom) {
            r.rc = -EPERM;
            return;
        }
        c.role = BP_SIM_ROLE_DOM0;
    } else if (m.role == BP_SIM_ROLE_GUEST) {
        // The domain is the socket's; a HELLO naming another one is a
        // misconfigured or hostile guest, refused rather than obeyed.
        Domain* dom = c.socket_dom;
        if (!dom || (m.domid != 0 && m.domid != dom->cfg.domid)) {
            r.rc = -EPERM;
            return;
        }
        std::lock_guard lk(dom->mu);
        unsigned v = 0;
        while (v < dom->vcpu_used.size() && dom->vcpu_used[v])
            v++;
        if (v == dom->vcpu_used.size()) {
            r.rc = -EBUSY; // every vCPU has a connection
            return;
        }
        dom->vcpu_used[v] = true;
        c.role = BP_SIM_ROLE_GUEST;
        c.dom = dom;
        c.vcpu = v;
        r.vcpu = static_cast<uint16_t>(v);
        r.nr_vcpus = static_cast<uint16_t>(dom->cfg.vcpus);
    } else {
        r.rc = -EINVAL;
    }
}

void SimHypervisor::lookup_domain(Conn& c, const bp_sim_msg& m, bp_sim_msg& r) {
    if (c.role != BP_SIM_ROLE_DOM0) {
        r.rc = -EPERM;
        return;
    }
    std::string name(m.name, strnlen(m.name, sizeof(m.name)));
    Domain* dom = name.empty() ? find(m.domid) : find(name);
    if (!dom) {
        r.rc = -ESRCH;
        return;
    }
    r.domid = dom->cfg.domid;
    r.nr_vcpus = static_cast<uint16_t>(dom->cfg.vcpus);
    std::memset(r.name, 0, sizeof(r.name));
    std::strncpy(r.name, dom->cfg.name.c_str(), sizeof(r.name) - 1);
}

void SimHypervisor::create_ioreq_server(Conn& c, const bp_sim_msg& m, bp_sim_msg& r,
                                        std::vector<FD>& fds) {
    Domain* dom = c.role == BP_SIM_ROLE_DOM0 ? find(m.domid) : nullptr;
    if (!dom) {
        r.rc = c.role == BP_SIM_ROLE_DOM0 ? -ESRCH : -EPERM;
        return;
    }
    std::lock_guard lk(dom->mu);
    if (dom->server) {
        r.rc = -EEXIST;
        return;
    }
    auto srv = std::make_shared<IoreqServer>();
    void* map;
    srv->ioreq_fd = make_memfd("ioreq", 4096, &map);
    srv->ioreq = static_cast<shared_iopage_t*>(map);
    for (unsigned v = 0; v < dom->cfg.vcpus; v++) {
        srv->to_dm.push_back(make_eventfd());
        srv->from_dm.push_back(make_eventfd(0)); // blocking: the vCPU's wait reads it
    }
    srv->owner = c.id;
    pass(fds, srv->ioreq_fd.get());
    for (unsigned v = 0; v < dom->cfg.vcpus; v++) {
        pass(fds, srv->to_dm[v].get());
        pass(fds, srv->from_dm[v].get());
    }
    dom->server = std::move(srv);
    r.ioservid = 0;
    r.nr_vcpus = static_cast<uint16_t>(dom->cfg.vcpus);
}

// The busprof page (ACQUIRE_PAGE) or a Xen-bound event channel (BIND_EVTCHN).
void SimHypervisor::hand_out(Conn& c, const bp_sim_msg& m, bp_sim_msg& r, std::vector<FD>& fds) {
    Domain* dom = c.role == BP_SIM_ROLE_DOM0 ? find(m.domid) : nullptr;
    if (!dom) {
        r.rc = c.role == BP_SIM_ROLE_DOM0 ? -ESRCH : -EPERM;
        return;
    }
    std::lock_guard lk(dom->mu);
    const FD* fd = m.type == BP_SIM_ACQUIRE_PAGE ? &dom->page_fd
                   : m.port < dom->evtchn.size() ? &dom->evtchn[m.port]
                                                 : nullptr;
    if (!fd || !*fd) {
        r.rc = -ENOENT;
        return;
    }
    pass(fds, fd->get());
}

void SimHypervisor::hypercall(Conn& c, const bp_sim_msg& m, const std::vector<uint8_t>& payload,
                              bp_sim_msg& r, std::vector<uint8_t>& out) {
    struct vcpu* v = c.role == BP_SIM_ROLE_GUEST ? &c.dom->vcpus[c.vcpu] : &dom0_->vcpus[0];
    const RunningOn on(v);
    static_assert(BP_SIM_ARG_MAX >= sizeof(xen_busprof_query_mmio) &&
                  BP_SIM_ARG_MAX >= sizeof(xen_busprof_query) &&
                  BP_SIM_ARG_MAX >= sizeof(xen_busprof_extract_wide) &&
                  BP_SIM_ARG_MAX >= sizeof(xen_busprof_dom0_span));
    alignas(8) uint8_t arg[BP_SIM_ARG_MAX];
    std::memcpy(arg, m.arg, sizeof(arg));
    // Records as the sub-op has them: plain, extended or wide (sim-proto.h),
    // in room for the widest.
    std::vector<xen_busprof_record_wide> records;
    const bool wide = m.cmd == XEN_BUSPROF_extract_wide;
    bool guest_extract = c.role == BP_SIM_ROLE_GUEST &&
                         (m.cmd == XEN_BUSPROF_extract || m.cmd == XEN_BUSPROF_extract_ext || wide);
    size_t rec_size = wide                               ? sizeof(xen_busprof_record_wide)
                      : m.cmd == XEN_BUSPROF_extract_ext ? sizeof(xen_busprof_record_ext)
                                                         : sizeof(xen_busprof_record);

    // Point guest handles at buffers here, as Xen would at guest memory.
    if (guest_extract && wide) {
        auto* x = reinterpret_cast<xen_busprof_extract_wide*>(arg);
        records.resize(std::min<uint32_t>(x->nr, XEN_BUSPROF_EXTRACT_MAX));
        set_xen_guest_handle(x->buffer, records.data());
    } else if (guest_extract) {
        auto* x = reinterpret_cast<xen_busprof_extract*>(arg);
        records.resize(std::min<uint32_t>(x->nr, XEN_BUSPROF_EXTRACT_MAX));
        set_xen_guest_handle(x->buffer, reinterpret_cast<xen_busprof_record*>(records.data()));
    } else if (m.cmd == XEN_BUSPROF_extract_reply) {
        auto* x = reinterpret_cast<xen_busprof_extract_reply*>(arg);
        rec_size = x->flags & XEN_BUSPROF_REPLY_WIDE  ? sizeof(xen_busprof_record_wide)
                   : x->flags & XEN_BUSPROF_REPLY_EXT ? sizeof(xen_busprof_record_ext)
                                                      : sizeof(xen_busprof_record);
        if (payload.size() != m.nr * rec_size || x->nr != m.nr) {
            r.rc = -EINVAL;
            return;
        }
        records.resize(m.nr);
        // An empty vector's data() may be null, which memcpy must not get.
        if (!payload.empty())
            std::memcpy(records.data(), payload.data(), payload.size());
        set_xen_guest_handle(x->records, records.data());
    }

    XEN_GUEST_HANDLE_PARAM(void) h;
    set_xen_guest_handle(h, arg);
    r.rc = static_cast<int32_t>(busprof_op(v, m.cmd, h));
    std::memcpy(r.arg, arg, sizeof(r.arg));

    if (guest_extract && r.rc == 0) {
        const uint32_t nr = wide ? reinterpret_cast<xen_busprof_extract_wide*>(arg)->nr
                                 : reinterpret_cast<xen_busprof_extract*>(arg)->nr;
        r.nr = std::min<uint32_t>(nr, static_cast<uint32_t>(records.size()));
        out.resize(r.nr * rec_size);
        if (!out.empty())
            std::memcpy(out.data(), records.data(), out.size());
    }
}

// Where a trapped access waits: the profiler's ioreq server the routing
// decision named, kept for as long as the access waits on it, the vCPU's
// slot in its page and the vCPU's event channels.
struct SimHypervisor::Waiting {
    std::shared_ptr<IoreqServer> srv;
    ioreq_t* p = nullptr;
    int to_dm = -1, from_dm = -1;
};

// A guest's access in either space, as the ioreq carries it.
struct SimHypervisor::Access {
    bool mmio;
    uint64_t addr; // port, or guest-physical address
    unsigned size;
    uint32_t dir; // XEN_BUSPROF_DIR_*
    uint64_t value;
    uint64_t rip, task;
};

// A guest's IN/OUT: what Xen's handle_pio and ioreq_send do.
void SimHypervisor::pio(Conn& c, bp_sim_msg& r, uint64_t task) {
    Domain* dom = c.dom;
    struct vcpu* v = &dom->vcpus[c.vcpu];
    const RunningOn on(v);
    unsigned size = r.size;

    // Before anything uses size: a guest chooses it.
    if ((size != 1 && size != 2 && size != 4) || r.port > 0xffff || r.dir > XEN_BUSPROF_DIR_IN) {
        r.rc = -EINVAL;
        return;
    }
    const uint32_t ones = size == 4 ? 0xffffffffu : (1u << (8 * size)) - 1;
    const Access a{false, r.port, size, r.dir, r.value, r.rip, task};
    Waiting w = route(c, a);
    if (!w.p) {
        pass_through(*dom, r, ones);
        return;
    }
    uint64_t data = 0;
    if (serve_trapped(c, w, a, &data) != Answer::answered) {
        // The profiler died or hung: complete the access as an unclaimed
        // port and drop the traps, never leave the vCPU stuck.
        busprof_access_timeout(v, r.port);
        data = ones;
    }
    if (r.dir == XEN_BUSPROF_DIR_IN)
        r.value = static_cast<uint32_t>(data) & ones;
}

// A guest's access to a page of device memory, in the sim guest's window
// over the BAR (every access comes here): what the hardware does for a
// directly mapped page, and for one a trap unmapped what Xen's
// hvmemul_do_io does: the core routes it, a trapped access goes to the
// profiler as an ioreq of type COPY, one it does not route (it reaches
// past the trapped pages) to the device.
void SimHypervisor::mmio(Conn& c, bp_sim_msg& r, uint64_t task) {
    Domain* dom = c.dom;
    struct vcpu* v = &dom->vcpus[c.vcpu];
    const RunningOn on(v);
    bp_sim_mmio io;
    std::memcpy(&io, r.arg, sizeof(io));
    const unsigned size = r.size;
    if ((size != 1 && size != 2 && size != 4 && size != 8) || r.dir > XEN_BUSPROF_DIR_IN ||
        io.addr > BUSPROF_MMIO_MAX_ADDR - (size - 1)) {
        r.rc = -EINVAL;
        return;
    }
    const uint64_t ones = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
    Access a{true, io.addr, size, r.dir, io.value & ones, r.rip, task};
    bool unmapped;
    {
        std::lock_guard lk(dom->p2m_mu);
        const uint64_t g0 = a.addr >> XEN_BUSPROF_MMIO_PAGE_SHIFT;
        const uint64_t g1 = (a.addr + size - 1) >> XEN_BUSPROF_MMIO_PAGE_SHIFT;
        unmapped = std::binary_search(dom->unmapped.begin(), dom->unmapped.end(), g0) ||
                   std::binary_search(dom->unmapped.begin(), dom->unmapped.end(), g1);
    }
    Waiting w;
    if (unmapped)
        w = route(c, a);
    if (!w.p) {
        mmio_pass_through(*dom, a);
    } else if (uint64_t data = 0; serve_trapped(c, w, a, &data) == Answer::answered) {
        if (a.dir == XEN_BUSPROF_DIR_IN)
            a.value = data & ones;
    } else {
        busprof_mmio_access_timeout(v, a.addr, size);
        if (a.dir == XEN_BUSPROF_DIR_IN)
            a.value = ones;
    }
    if (a.dir == XEN_BUSPROF_DIR_IN)
        io.value = a.value;
    std::memcpy(r.arg, &io, sizeof(io));
}

// The routing decision is the hypervisor core's, as in Xen's I/O path
// (busprof_ioreq_route()): the server it names, and the stamp of a trapped
// access, taken with the decision.  Who made it: the guest thread (the
// guest library sends its id in nr), on the CPU this simulated vCPU runs
// on now.  No slot: the access takes its usual path.
SimHypervisor::Waiting SimHypervisor::route(Conn& c, const Access& a) {
    Domain* dom = c.dom;
    struct vcpu* v = &dom->vcpus[c.vcpu];
    int cpu = ::sched_getcpu();
    v->processor = cpu < 0 ? 0 : static_cast<unsigned>(cpu);
    struct busprof_route route {};
    const bool trapped =
        a.mmio
            ? busprof_route_mmio_access(v, a.addr, a.size, a.rip, a.task, &route)
            : busprof_route_access(v, static_cast<unsigned>(a.addr), a.size, a.rip, a.task, &route);
    // One look under the domain's lock takes the server and fills its slot
    // for this vCPU (only this vCPU's thread writes it).
    Waiting w;
    if (trapped) {
        std::lock_guard lk(dom->mu);
        if (dom->server && route.ioservid == 0 && route.profiler == 0) {
            w.srv = dom->server;
            w.p = &w.srv->ioreq->vcpu_ioreq[c.vcpu];
            w.to_dm = w.srv->to_dm[c.vcpu].get();
            w.from_dm = w.srv->from_dm[c.vcpu].get();
        }
    }
    if (trapped && !w.srv) {
        // The profiler's server is gone: drop the traps, and the access
        // takes its usual path.
        if (a.mmio)
            busprof_mmio_access_timeout(v, a.addr, a.size);
        else
            busprof_access_timeout(v, static_cast<unsigned>(a.addr));
    }
    return w;
}

// A trapped access sent to the profiler and waited for; *data is its
// answer (a read's value) when it came.  If not, the slot stays with the
// profiler, as in Xen, which must see that the request was given up (the
// timeout message) and leave the bus alone; its late answer is ignored.
SimHypervisor::Answer SimHypervisor::serve_trapped(Conn& c, const Waiting& w, const Access& a,
                                                   uint64_t* data) {
    Domain& dom = *c.dom;
    send_ioreq(w, c.vcpu, a);

    // Xen's set_timer(): the timer thread wakes this vCPU once the deadline
    // is past.  The wait itself is then untimed.
    const s_time_t deadline = arm_timer(dom, c.vcpu, w.from_dm);
    // Xen's stop_timer(), before srv (and from_dm) can go: it waits out a
    // wake-up the timer thread is writing.
    struct StopTimer {
        std::atomic<s_time_t>& due;
        ~StopTimer() {
            s_time_t cur = due.load();
            while (!(cur != kTimerFiring && due.compare_exchange_weak(cur, 0)))
                if (cur == kTimerFiring) {
                    std::this_thread::yield();
                    cur = due.load();
                }
        }
    } stop_timer{dom.wait_deadline[c.vcpu]};

    const Answer ans = wait_for_answer(dom, w, deadline);
    if (ans == Answer::gone)
        set_ioreq_state(w.p, STATE_IOREQ_NONE);
    if (ans != Answer::answered)
        return ans;
    *data = w.p->data;
    set_ioreq_state(w.p, STATE_IOREQ_NONE);
    busprof_stamp_resume(&dom.vcpus[c.vcpu]);
    return ans;
}

// An access no profiler takes.
void SimHypervisor::pass_through(Domain& dom, bp_sim_msg& r, uint32_t ones) {
    const unsigned size = r.size;
    if (busprof_ranges_covers(&dom.ioports, r.port, r.port + size - 1)) {
        // Passed through, as Xen's g2m_portio does for a port the domain
        // may access: the machine's device performs it.
        uint32_t val = machine_.access(static_cast<uint16_t>(r.port), size,
                                       r.dir == XEN_BUSPROF_DIR_OUT, r.value);
        if (r.dir == XEN_BUSPROF_DIR_IN)
            r.value = val;
    } else if (r.dir == XEN_BUSPROF_DIR_IN) {
        // No device for this domain (an HVM guest gets no #GP for port
        // I/O): reads float high, writes vanish.
        r.value = ones;
    }
}

// A memory-mapped access no profiler takes: the device, through the
// domain's direct mapping of it; outside its iomem nothing is mapped, so
// reads float high and writes vanish (as Xen completes an access to an
// unpopulated page).
void SimHypervisor::mmio_pass_through(Domain& dom, Access& a) {
    const bool write = a.dir == XEN_BUSPROF_DIR_OUT;
    if (busprof_ranges_covers(&dom.iomem, a.addr, a.addr + a.size - 1)) {
        uint64_t val = machine_.mmio(a.addr, a.size, write, a.value);
        if (!write)
            a.value = val;
    } else if (!write) {
        a.value = a.size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * a.size)) - 1;
    }
}

// The ioreq into the vCPU's slot, handed over, and the profiler told.  A
// memory-mapped access is of type COPY, as Xen's emulator sends it.
void SimHypervisor::send_ioreq(const Waiting& w, unsigned vcpu, const Access& a) {
    ioreq_t req{};
    req.addr = a.addr;
    req.data = a.dir == XEN_BUSPROF_DIR_OUT ? a.value : 0;
    req.count = 1;
    req.size = a.size;
    req.vp_eport = vcpu;
    req.dir = a.dir == XEN_BUSPROF_DIR_IN ? IOREQ_READ : IOREQ_WRITE;
    req.type = a.mmio ? IOREQ_TYPE_COPY : IOREQ_TYPE_PIO;
    req.state = STATE_IOREQ_READY;
    publish_ioreq(w.p, req);
    uint64_t one = 1;
    (void)!::write(w.to_dm, &one, sizeof(one));
}

// The vCPU's deadline, for the timer thread to wake it at (from_dm).
s_time_t SimHypervisor::arm_timer(Domain& dom, unsigned vcpu, int from_dm) {
    unsigned timeout_ms = busprof_timeout_ms(&dom.d);
    if (!timeout_ms)
        timeout_ms = 1000;
    const s_time_t deadline = NOW() + MILLISECS(timeout_ms);
    if (dom.wait_bound_ms.load(std::memory_order_relaxed) != timeout_ms)
        dom.wait_bound_ms.store(timeout_ms, std::memory_order_relaxed);
    dom.wait_fd[vcpu].store(from_dm);
    dom.wait_deadline[vcpu].store(deadline);
    if (deadline < timer_next_.load())
        wake_timers();
    return deadline;
}

// Waits for the profiler's answer in the slot, until the deadline, the
// profiler's end or the simulator's stop.
SimHypervisor::Answer SimHypervisor::wait_for_answer(Domain& dom, const Waiting& w,
                                                     s_time_t deadline) {
    for (bool waited = false;; waited = true) {
        if (ioreq_state(w.p) == STATE_IORESP_READY)
            return Answer::answered;
        // Whether the profiler is still there, and the time left, are
        // asked only after a wait that brought no answer: the answer's own
        // path takes no lock and reads the clock only for the stamps and
        // the deadline.  A stop is looked at before every wait: its kick
        // may have come before this vCPU began to wait (it sets stopping_
        // first).
        if (waited || stopping_) {
            const s_time_t left = deadline - NOW();
            bool dead;
            {
                std::lock_guard lk(dom.mu);
                // Gone, even if another profiler came since: only this
                // one can answer this request.
                dead = dom.server != w.srv;
            }
            if (dead)
                return Answer::gone;
            if (left <= 0 || stopping_)
                return Answer::given_up;
        }
        // Woken by the profiler's answer, by its end or the simulator's
        // stop (kick()), or by the timer thread; one system call.  A
        // wake-up left from an earlier access (a late answer, the timer's)
        // costs one more turn of this loop.
        uint64_t cnt;
        (void)!::read(w.from_dm, &cnt, sizeof(cnt));
    }
}

} // namespace busprof::sim
