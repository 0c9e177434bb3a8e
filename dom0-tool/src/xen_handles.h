/* SPDX-License-Identifier: GPL-2.0-only */
// Move-only owners of libxen handles and of what they hand out (hypercall
// buffers, foreign resource mappings, event channel bindings, ioreq
// servers), plus the xentoollog logger that routes libxen's messages to
// busprof's stderr.  A failing libxen call becomes a SystemError here, so
// callers never see a raw -1.
#pragma once

#include "error.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include <sys/mman.h>

extern "C" {
#include <xen/memory.h>
#include <xencall.h>
#include <xendevicemodel.h>
#include <xenevtchn.h>
#include <xenforeignmemory.h>
#include <xenstore.h>
#include <xentoollog.h>
}

namespace busprof::xen {

// busprof's xentoollog logger: warnings and errors always, everything when
// BUSPROF_DEBUG is set.  libxen casts the vtable pointer back to its own
// logger type, so the vtable must come first.
struct Logger {
    xentoollog_logger vtable;
    bool debug;
};

__attribute__((format(printf, 5, 0))) inline void logger_vmessage(xentoollog_logger* l,
                                                                  xentoollog_level level,
                                                                  int errnoval, const char* context,
                                                                  const char* format, va_list ap) {
    if (level < XTL_WARN && !reinterpret_cast<Logger*>(l)->debug)
        return;
    char msg[1024];
    std::vsnprintf(msg, sizeof(msg), format, ap);
    std::string line = "busprof: xen: ";
    if (context)
        line += std::string(context) + ": ";
    line += msg;
    if (errnoval >= 0)
        line += std::string(": ") + std::strerror(errnoval);
    std::fprintf(stderr, "%s\n", line.c_str());
}

inline void logger_progress(xentoollog_logger* l, const char* context, const char* doing_what,
                            int percent, unsigned long, unsigned long) {
    if (reinterpret_cast<Logger*>(l)->debug)
        std::fprintf(stderr, "busprof: xen: %s%s%s: %d%%\n", context ? context : "",
                     context ? ": " : "", doing_what, percent);
}

// The logger is static and outlives every handle; nothing to free.
inline void logger_destroy(xentoollog_logger*) {}

inline xentoollog_logger* logger() {
    static Logger l = {{logger_vmessage, logger_progress, logger_destroy},
                       std::getenv("BUSPROF_DEBUG") != nullptr};
    return &l.vtable;
}

// Handles: std::unique_ptr with the library's close function.
template <auto Close> struct Closer {
    template <class T> void operator()(T* p) const noexcept { (void)Close(p); }
};
struct FreeDeleter {
    void operator()(void* p) const noexcept { std::free(p); }
};
using XencallHandle = std::unique_ptr<xencall_handle, Closer<xencall_close>>;
using DevicemodelHandle = std::unique_ptr<xendevicemodel_handle, Closer<xendevicemodel_close>>;
using EvtchnHandle = std::unique_ptr<xenevtchn_handle, Closer<xenevtchn_close>>;
using ForeignmemoryHandle =
    std::unique_ptr<xenforeignmemory_handle, Closer<xenforeignmemory_close>>;
using XenstoreHandle = std::unique_ptr<xs_handle, Closer<xs_close>>;
// Strings and arrays that libxenstore returns from malloc().
template <class T> using Malloced = std::unique_ptr<T, FreeDeleter>;

inline DevicemodelHandle open_devicemodel() {
    DevicemodelHandle h(xendevicemodel_open(logger(), 0));
    if (!h)
        throw_errno("opening libxendevicemodel (xendevicemodel_open)");
    return h;
}

inline EvtchnHandle open_evtchn() {
    EvtchnHandle h(xenevtchn_open(logger(), 0));
    if (!h)
        throw_errno("opening /dev/xen/evtchn (xenevtchn_open)");
    return h;
}

inline ForeignmemoryHandle open_foreignmemory() {
    ForeignmemoryHandle h(xenforeignmemory_open(logger(), 0));
    if (!h)
        throw_errno("opening libxenforeignmemory (xenforeignmemory_open)");
    return h;
}

// Memory a hypercall may read and write (locked, never faulting).
class CallBuffer {
  public:
    CallBuffer(xencall_handle* h, size_t size) : h_(h), p_(xencall_alloc_buffer(h, size)) {
        if (!p_)
            throw_errno("allocating a hypercall buffer (xencall_alloc_buffer)");
    }
    CallBuffer(CallBuffer&& o) noexcept : h_(o.h_), p_(std::exchange(o.p_, nullptr)) {}
    CallBuffer& operator=(CallBuffer&&) = delete;
    CallBuffer(const CallBuffer&) = delete;
    CallBuffer& operator=(const CallBuffer&) = delete;
    ~CallBuffer() {
        if (p_)
            xencall_free_buffer(h_, p_);
    }

    void* get() const { return p_; }

  private:
    xencall_handle* h_;
    void* p_;
};

// Frames of a domain's resource (XENMEM_acquire_resource) mapped here.
class ResourceMapping {
  public:
    ResourceMapping() = default;
    ResourceMapping(xenforeignmemory_handle* fmem, domid_t domid, unsigned type, unsigned id,
                    unsigned long frame, unsigned long nr_frames, const std::string& what)
        : fmem_(fmem) {
        res_ = xenforeignmemory_map_resource(fmem, domid, type, id, frame, nr_frames, &addr_,
                                             PROT_READ | PROT_WRITE, 0);
        if (!res_)
            throw_errno(what + " (xenforeignmemory_map_resource)");
    }
    ResourceMapping(ResourceMapping&& o) noexcept
        : fmem_(o.fmem_), res_(std::exchange(o.res_, nullptr)),
          addr_(std::exchange(o.addr_, nullptr)) {}
    ResourceMapping& operator=(ResourceMapping&& o) noexcept {
        if (this != &o) {
            reset();
            fmem_ = o.fmem_;
            res_ = std::exchange(o.res_, nullptr);
            addr_ = std::exchange(o.addr_, nullptr);
        }
        return *this;
    }
    ResourceMapping(const ResourceMapping&) = delete;
    ResourceMapping& operator=(const ResourceMapping&) = delete;
    ~ResourceMapping() { reset(); }

    void* addr() const { return addr_; }

  private:
    void reset() {
        if (res_)
            xenforeignmemory_unmap_resource(fmem_, res_);
        res_ = nullptr;
        addr_ = nullptr;
    }

    xenforeignmemory_handle* fmem_ = nullptr;
    xenforeignmemory_resource_handle* res_ = nullptr;
    void* addr_ = nullptr;
};

// A local event channel port bound to remote port `remote` of a domain.
class EvtchnBinding {
  public:
    EvtchnBinding() = default;
    EvtchnBinding(xenevtchn_handle* h, domid_t domid, evtchn_port_t remote, const std::string& what)
        : h_(h) {
        xenevtchn_port_or_error_t p = xenevtchn_bind_interdomain(h, domid, remote);
        if (p < 0)
            throw_errno(what + " (xenevtchn_bind_interdomain)");
        local_ = static_cast<evtchn_port_t>(p);
        bound_ = true;
    }
    EvtchnBinding(EvtchnBinding&& o) noexcept
        : h_(o.h_), local_(o.local_), bound_(std::exchange(o.bound_, false)) {}
    EvtchnBinding& operator=(EvtchnBinding&& o) noexcept {
        if (this != &o) {
            reset();
            h_ = o.h_;
            local_ = o.local_;
            bound_ = std::exchange(o.bound_, false);
        }
        return *this;
    }
    EvtchnBinding(const EvtchnBinding&) = delete;
    EvtchnBinding& operator=(const EvtchnBinding&) = delete;
    ~EvtchnBinding() { reset(); }

    evtchn_port_t local() const { return local_; }

  private:
    void reset() {
        if (bound_)
            xenevtchn_unbind(h_, local_);
        bound_ = false;
    }

    xenevtchn_handle* h_ = nullptr;
    evtchn_port_t local_ = 0;
    bool bound_ = false;
};

// An ioreq server of a domain, created with synchronous ioreqs only.
// Destroying it also disables it.
class IoreqServer {
  public:
    IoreqServer() = default;
    IoreqServer(xendevicemodel_handle* dm, domid_t domid) : dm_(dm), domid_(domid) {
        if (xendevicemodel_create_ioreq_server(dm, domid, HVM_IOREQSRV_BUFIOREQ_OFF, &id_) < 0)
            throw_errno("creating an ioreq server (xendevicemodel_create_ioreq_server)");
        live_ = true;
    }
    IoreqServer(IoreqServer&& o) noexcept
        : dm_(o.dm_), domid_(o.domid_), id_(o.id_), live_(std::exchange(o.live_, false)) {}
    IoreqServer& operator=(IoreqServer&& o) noexcept {
        if (this != &o) {
            reset();
            dm_ = o.dm_;
            domid_ = o.domid_;
            id_ = o.id_;
            live_ = std::exchange(o.live_, false);
        }
        return *this;
    }
    IoreqServer(const IoreqServer&) = delete;
    IoreqServer& operator=(const IoreqServer&) = delete;
    ~IoreqServer() { reset(); }

    ioservid_t id() const { return id_; }

    void enable() {
        if (xendevicemodel_set_ioreq_server_state(dm_, domid_, id_, 1) < 0)
            throw_errno("enabling the ioreq server (xendevicemodel_set_ioreq_server_state)");
    }

  private:
    void reset() {
        // Fails harmlessly when the domain is gone already.
        if (live_)
            xendevicemodel_destroy_ioreq_server(dm_, domid_, id_);
        live_ = false;
    }

    xendevicemodel_handle* dm_ = nullptr;
    domid_t domid_ = 0;
    ioservid_t id_ = 0;
    bool live_ = false;
};

} // namespace busprof::xen
