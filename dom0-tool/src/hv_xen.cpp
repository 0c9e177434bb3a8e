// SPDX-License-Identifier: GPL-2.0-only
// The xen backend: the profiler is an ioreq server of the profiled domain
// (libxendevicemodel), maps its ioreq page and the busprof page
// (libxenforeignmemory, XENMEM_acquire_resource), waits on event channels
// (libxenevtchn) and issues busprof_op through privcmd (libxencall).
// Domains are named in xenstore and checked with busprof_op itself.
//
// No libxenctrl: xenctrl.h needs GNU extensions (anonymous unions in
// hvm/save.h, __align8__ in the foreign headers) and redefines
// set_xen_guest_handle, while busprof builds as strict C++20.  What it
// would give (does the domain exist, is it HVM, how many vCPUs) comes
// from XEN_BUSPROF_query, the ioreq page and XEN_BUSPROF_attach.
#include "error.h"
#include "hv.h"
#include "xen_handles.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <unordered_map>

namespace busprof {

namespace {

using namespace xen;

const char* const kDom0Hint =
    "run in dom0 of a busprof-patched Xen; on other machines use --backend sim";

// The busprof_op hypercall.  Shared by the hypervisor and its channels: a
// channel detaches through it when it goes.
class BusprofCall {
  public:
    BusprofCall() {
        h_.reset(xencall_open(logger(), 0));
        if (!h_) {
            int e = errno;
            throw UserError(std::string("cannot open Xen's privcmd interface: ") + std::strerror(e),
                            e == EACCES || e == EPERM ? "run busprof as root in dom0" : kDom0Hint);
        }
        // Sub-op 0 does not exist: busprof answers -EOPNOTSUPP, a Xen without
        // busprof -ENOSYS.  Better to say so now than at the first real call.
        uint64_t none = 0;
        if (op(0, &none, sizeof(none)) == -ENOSYS)
            throw UserError("this Xen has no busprof_op hypercall",
                            "boot a Xen built with xen-patches/ (CONFIG_BUSPROF=y); "
                            "on other machines use --backend sim");
    }

    // Returns 0 or -errno, never throws: the caller reports the sub-op's error.
    long op(unsigned cmd, void* arg, size_t size, const void* records = nullptr, size_t bytes = 0) {
        try {
            // Xen may read and write only hypercall-safe memory.
            CallBuffer buf(h_.get(), size ? size : 1);
            if (size)
                std::memcpy(buf.get(), arg, size);
            std::optional<CallBuffer> recs;
            if (cmd == XEN_BUSPROF_extract_reply) {
                if (size < sizeof(xen_busprof_extract_reply))
                    return -EINVAL;
                auto* rep = static_cast<xen_busprof_extract_reply*>(buf.get());
                size_t rec_size =
                    rep->flags & XEN_BUSPROF_REPLY_WIDE  ? sizeof(xen_busprof_record_wide)
                    : rep->flags & XEN_BUSPROF_REPLY_EXT ? sizeof(xen_busprof_record_ext)
                                                         : sizeof(xen_busprof_record);
                if (rep->nr * rec_size > bytes)
                    return -EINVAL;
                void* p = nullptr;
                if (bytes) {
                    recs.emplace(h_.get(), bytes);
                    std::memcpy(recs->get(), records, bytes);
                    p = recs->get();
                }
                rep->records.p = p;
            }
            int rc = xencall2(h_.get(), __HYPERVISOR_busprof_op, cmd,
                              reinterpret_cast<uintptr_t>(buf.get()));
            if (rc < 0)
                return errno ? -errno : -EIO;
            if (size)
                std::memcpy(arg, buf.get(), size);
            return rc;
        } catch (const SystemError& e) {
            return -e.err();
        }
    }

  private:
    XencallHandle h_;
};

// Being the domain's profiler: detaches when it goes.
class Attachment {
  public:
    Attachment() = default;
    Attachment(std::shared_ptr<BusprofCall> call, domid_t domid)
        : call_(std::move(call)), domid_(domid) {}
    Attachment(Attachment&&) noexcept = default;
    Attachment& operator=(Attachment&& o) noexcept {
        if (this != &o) {
            reset();
            call_ = std::move(o.call_);
            domid_ = o.domid_;
        }
        return *this;
    }
    ~Attachment() { reset(); }

    void reset() {
        if (!call_)
            return;
        // -ENXIO / -ENOENT when Xen detached us already (the domain died).
        xen_busprof_domain d{};
        d.domid = domid_;
        call_->op(XEN_BUSPROF_detach, &d, sizeof(d));
        call_.reset();
    }

    std::shared_ptr<BusprofCall> call_;
    domid_t domid_ = 0;
};

UserError attach_error(const DomainInfo& d, Errno e) {
    std::string hint;
    if (e == EBUSY)
        hint = "another busprof daemon profiles it already";
    else if (e == E2BIG)
        hint = "busprof profiles guests with at most " + std::to_string(XEN_BUSPROF_MAX_VCPUS) +
               " vCPUs";
    else if (e == EINVAL)
        hint = "this busprof and the running Xen may speak different busprof interface "
               "versions; rebuild both from the same tree";
    else if (e == EPERM || e == EACCES)
        hint = kDom0Hint;
    return UserError("cannot attach to domain " + d.name + ": " + e.message(), hint);
}

// Members are declared in the order attach() acquires them, so that both
// the destructor and a constructor that throws part-way undo the steps in
// reverse: unbind the control channel, unmap the busprof page, detach,
// unbind the ioreq channels, unmap the ioreq page, destroy the server.
class XenChannel : public Channel {
  public:
    XenChannel(std::shared_ptr<BusprofCall> call, const DomainInfo& d, unsigned timeout_ms)
        : call_(std::move(call)), domid_(d.domid) {
        const std::string dom = "domain " + std::to_string(d.domid);
        dm_ = open_devicemodel();
        fmem_ = open_foreignmemory();
        evtchn_ = open_evtchn();
        // Never blocks in a read: a wait() that finds no port pending after
        // all (EAGAIN) returns to the caller's loop.
        int fd = xenevtchn_fd(evtchn_.get());
        int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            throw_errno("making the event channel descriptor non-blocking");

        server_ = IoreqServer(dm_.get(), domid_);
        const std::string srv = "ioreq server " + std::to_string(server_.id());
        ioreq_page_ = ResourceMapping(fmem_.get(), domid_, XENMEM_resource_ioreq_server,
                                      server_.id(), XENMEM_resource_ioreq_server_frame_ioreq(0), 1,
                                      dom + ": mapping the ioreq page of " + srv);
        ioreq = static_cast<shared_iopage_t*>(ioreq_page_.addr());

        // Xen writes each vCPU's vp_eport into the page when the server is
        // enabled, so enable before binding.  No port is mapped into the
        // server yet (busprof maps trapped ranges itself), so no ioreq
        // can arrive before the ports are bound.
        server_.enable();
        // Every vCPU of the domain has a slot with a non-zero port (port 0
        // is reserved); the rest of the page is zero.
        unsigned nr = 0;
        for (unsigned v = 0; v < kIoreqSlots; v++)
            if (ioreq->vcpu_ioreq[v].vp_eport)
                nr = v + 1;
        for (unsigned v = 0; v < nr; v++) {
            evtchn_port_t remote = ioreq->vcpu_ioreq[v].vp_eport;
            if (!remote)
                throw SystemError(dom + ": the ioreq page has no event channel for vCPU " +
                                      std::to_string(v),
                                  EPROTO);
            vcpu_ports_.emplace_back(evtchn_.get(), domid_, remote,
                                     dom + ": binding the ioreq event channel " +
                                         std::to_string(remote) + " of vCPU " + std::to_string(v));
            events_[vcpu_ports_.back().local()] = {Ev::ioreq, v};
        }

        xen_busprof_attach a{};
        a.domid = domid_;
        a.ioservid = server_.id();
        a.version = kProfilerInterface;
        a.timeout_ms = timeout_ms;
        if (long rc = call_->op(XEN_BUSPROF_attach, &a, sizeof(a)); rc < 0)
            throw attach_error(d, Errno(static_cast<int>(-rc)));
        attachment_ = Attachment(call_, domid_);
        if (a.nr_vcpus > nr)
            throw SystemError(dom + ": Xen reports " + std::to_string(a.nr_vcpus) +
                                  " vCPUs, the ioreq page " + std::to_string(nr),
                              EPROTO);
        nr_vcpus = a.nr_vcpus;

        busprof_page_ = ResourceMapping(fmem_.get(), domid_, XENMEM_resource_busprof, 0, 0, 1,
                                        dom + ": mapping the busprof page");
        page = static_cast<xen_busprof_page*>(busprof_page_.addr());
        if ((page->version >> 16) != (XEN_BUSPROF_INTERFACE_VERSION >> 16))
            throw SystemError(dom + ": the busprof page has interface version " +
                                  std::to_string(page->version >> 16) + ", expected " +
                                  std::to_string(XEN_BUSPROF_INTERFACE_VERSION >> 16),
                              EPROTO);

        ctrl_port_ = EvtchnBinding(evtchn_.get(), domid_, a.ctrl_port,
                                   dom + ": binding the busprof control event channel " +
                                       std::to_string(a.ctrl_port));
        events_[ctrl_port_.local()] = {Ev::ring, 0};
    }

    void wait(std::span<const int> wake_fds, std::vector<Ev>& out) override {
        if (wake_fds.size() > kMaxWakeFds)
            throw SystemError("more wake descriptors than a wait takes", EINVAL);
        pollfd p[1 + kMaxWakeFds];
        size_t nfds = 1;
        p[0] = {xenevtchn_fd(evtchn_.get()), POLLIN, 0};
        for (int fd : wake_fds)
            p[nfds++] = {fd, POLLIN, 0};
        int n = ::poll(p, nfds, -1);
        if (n < 0 && errno != EINTR)
            throw_errno("waiting for event channels (poll)");
        uint64_t cnt;
        for (size_t i = 1; n > 0 && i < nfds; i++)
            if (p[i].revents & POLLIN)
                (void)!::read(p[i].fd, &cnt, sizeof(cnt));
        if (n <= 0 || !(p[0].revents & POLLIN))
            return;
        // One pending port per wait, as a plain ioreq server takes them
        // (poll, pending, unmask: three system calls per event, not a
        // fourth to find none is left).  Another pending port keeps the
        // descriptor readable, and the caller's next wait returns at once.
        xenevtchn_port_or_error_t port = xenevtchn_pending(evtchn_.get());
        if (port < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            throw_errno("reading a pending event channel (xenevtchn_pending)");
        }
        // Unmask before the caller looks at the page and the ioreqs: an
        // event raised after that look is then delivered again, not lost.
        if (xenevtchn_unmask(evtchn_.get(), static_cast<evtchn_port_t>(port)) < 0)
            throw_errno("unmasking event channel " + std::to_string(port) + " (xenevtchn_unmask)");
        auto it = events_.find(static_cast<evtchn_port_t>(port));
        if (it != events_.end())
            out.push_back(it->second);
    }

    void notify_vcpu(unsigned v) override {
        if (v >= vcpu_ports_.size())
            return;
        if (xenevtchn_notify(evtchn_.get(), vcpu_ports_[v].local()) < 0)
            throw_errno("notifying vCPU " + std::to_string(v) + " of domain " +
                        std::to_string(domid_) + " (xenevtchn_notify)");
    }

    void detach() override { attachment_.reset(); }

  private:
    static constexpr size_t kMaxWakeFds = 4;
    // The ioreq page is one 4 KiB frame.
    static constexpr unsigned kIoreqSlots = 4096 / sizeof(ioreq_t);

    std::shared_ptr<BusprofCall> call_;
    domid_t domid_;
    DevicemodelHandle dm_;
    ForeignmemoryHandle fmem_;
    EvtchnHandle evtchn_;
    IoreqServer server_;
    ResourceMapping ioreq_page_;
    std::vector<EvtchnBinding> vcpu_ports_;
    Attachment attachment_;
    ResourceMapping busprof_page_;
    EvtchnBinding ctrl_port_;
    std::unordered_map<evtchn_port_t, Ev> events_; // local port -> event
};

class XenHypervisor : public Hypervisor {
  public:
    XenHypervisor() : call_(std::make_shared<BusprofCall>()) {}

    std::string name() const override { return "xen"; }

    DomainInfo lookup(const std::string& dom) override {
        DomainInfo d;
        if (std::optional<domid_t> id = parse_domid(dom)) {
            d.domid = *id;
            d.name = read_domain(*id, "name");
        } else {
            d.domid = id_of(dom);
            d.name = dom;
        }
        check(d.domid, dom);
        if (d.name.empty())
            d.name = std::to_string(d.domid);
        d.nr_vcpus = nr_vcpus_of(d.domid);
        return d;
    }

    Status op(unsigned cmd, void* arg, size_t size, const void* records, size_t bytes) override {
        return status_of(call_->op(cmd, arg, size, records, bytes));
    }

    std::unique_ptr<Channel> attach(const DomainInfo& d, unsigned timeout_ms) override {
        check(d.domid, d.name);
        return std::make_unique<XenChannel>(call_, d, timeout_ms);
    }

    // A privcmd handle of its own.
    std::unique_ptr<Hypervisor> reopen() override { return std::make_unique<XenHypervisor>(); }

  private:
    static std::optional<domid_t> parse_domid(const std::string& s) {
        if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
            return std::nullopt;
        unsigned long v = std::stoul(s);
        if (v >= DOMID_FIRST_RESERVED)
            return std::nullopt;
        return static_cast<domid_t>(v);
    }

    static UserError no_domain(const std::string& dom) {
        return UserError("no domain '" + dom + "'", "see 'xl list'");
    }

    // Xen's word on the domain: it exists, is not dying, is not PV, and
    // this dom0 may act as its device model.
    void check(domid_t id, const std::string& dom) {
        auto q = query(*this, id);
        if (q.ok())
            return;
        Errno e = q.error();
        if (e == ENOENT || e == ESRCH)
            throw no_domain(dom);
        if (e == EOPNOTSUPP)
            throw UserError("domain '" + dom + "' is a PV guest",
                            "busprof traps the port I/O of HVM and PVH guests only");
        if (e == EPERM || e == EACCES)
            throw UserError("not allowed to profile domain '" + dom + "': " + e.message(),
                            id == 0 ? "busprof profiles guests, not dom0 itself" : kDom0Hint);
        throw UserError("cannot query domain '" + dom + "': " + e.message());
    }

    // xenstore is optional for numeric ids: without it they go unnamed.
    xs_handle* xenstore(bool required) {
        if (!xs_) {
            xs_.reset(xs_open(0));
            if (!xs_ && required)
                throw UserError(std::string("cannot open xenstore to look up domain names: ") +
                                    std::strerror(errno),
                                "give the domain's numeric id (see 'xl list')");
        }
        return xs_.get();
    }

    // /local/domain/<id>/<rel>, or "" if it is not there.
    std::string read_domain(domid_t id, const std::string& rel) {
        if (!xenstore(false))
            return {};
        std::string path = "/local/domain/" + std::to_string(id) + "/" + rel;
        unsigned len = 0;
        Malloced<char> v(static_cast<char*>(xs_read(xs_.get(), XBT_NULL, path.c_str(), &len)));
        return v ? std::string(v.get(), len) : std::string();
    }

    // The toolstack keeps each domain's name in /local/domain/<id>/name.
    domid_t id_of(const std::string& name) {
        xenstore(true);
        unsigned n = 0;
        Malloced<char*> ids(xs_directory(xs_.get(), XBT_NULL, "/local/domain", &n));
        if (!ids)
            throw SystemError("listing domains in xenstore (/local/domain)", errno);
        for (unsigned i = 0; i < n; i++) {
            std::optional<domid_t> id = parse_domid(ids.get()[i]);
            if (id && read_domain(*id, "name") == name)
                return *id;
        }
        throw no_domain(name);
    }

    // libxl writes cpu/<n>/availability for each of the domain's vCPUs;
    // 0 if unknown.  Informational: the channel counts them in the ioreq
    // page and gets Xen's count from XEN_BUSPROF_attach.
    unsigned nr_vcpus_of(domid_t id) {
        if (!xenstore(false))
            return 0;
        std::string path = "/local/domain/" + std::to_string(id) + "/cpu";
        unsigned n = 0;
        Malloced<char*> cpus(xs_directory(xs_.get(), XBT_NULL, path.c_str(), &n));
        return cpus ? n : 0;
    }

    std::shared_ptr<BusprofCall> call_;
    XenstoreHandle xs_;
};

} // namespace

std::unique_ptr<Hypervisor> make_xen_hypervisor() {
    return std::make_unique<XenHypervisor>();
}

} // namespace busprof
