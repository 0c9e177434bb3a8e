/* SPDX-License-Identifier: GPL-2.0-only */
// Move-only owners of libxen handles and of what they hand out (hypercall
// buffers, foreign resource mappings, event channel bindings, ioreq
// servers), plus the xentoollog logger that routes libxen's messages to
// busprof's log.  A failing libxen call becomes a SystemError here, so
// callers never see a raw -1.
#pragma once

#include "error.h"
#include "log.h"

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

// busprof's xentoollog logger: libxen's warnings and errors go to busprof's
// log at those levels, the rest at debug (-v).  libxen casts the vtable
// pointer back to its own logger type, so the vtable must come first.
struct Logger {
    xentoollog_logger vtable;
};

__attribute__((format(printf, 5, 0))) inline void logger_vmessage(xentoollog_logger*,
                                                                  xentoollog_level level,
                                                                  int errnoval, const char* context,
                                                                  const char* format, va_list ap) {
    const LogLevel l = level >= XTL_ERROR  ? LogLevel::error
                       : level >= XTL_WARN ? LogLevel::warning
                                           : LogLevel::debug;
    if (!log_enabled(l))
        return;
    char msg[1024];
    std::vsnprintf(msg, sizeof(msg), format, ap);
    std::string line = "xen: ";
    if (context)
        line += std::string(context) + ": ";
    line += msg;
    if (errnoval >= 0)
        line += std::string(": ") + std::strerror(errnoval);
    log(l, "%s", line.c_str());
}

inline void logger_progress(xentoollog_logger*, const char* context, const char* doing_what,
                            int percent, unsigned long, unsigned long) {
    log(LogLevel::debug, "xen: %s%s%s: %d%%", context ? context : "", context ? ": " : "",
        doing_what, percent);
}

// The logger is static and outlives every handle; nothing to free.
inline void logger_destroy(xentoollog_logger*) {}

inline xentoollog_logger* logger() {
    static Logger l = {{logger_vmessage, logger_progress, logger_destroy}};
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

// What the classes below share: sole ownership of one thing that Release
// gives back, movable, released once.  State is what Release needs.
template <class State, void (*Release)(State&)> class Owner {
  public:
    Owner() = default;
    explicit Owner(State s) : s_(s), live_(true) {}
    Owner(Owner&& o) noexcept : s_(o.s_), live_(std::exchange(o.live_, false)) {}
    Owner& operator=(Owner&& o) noexcept {
        if (this != &o) {
            reset();
            s_ = o.s_;
            live_ = std::exchange(o.live_, false);
        }
        return *this;
    }
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    ~Owner() { reset(); }

    const State& get() const { return s_; }

  private:
    void reset() {
        if (live_)
            Release(s_);
        live_ = false;
    }

    State s_{};
    bool live_ = false;
};

// Memory a hypercall may read and write (locked, never faulting).
struct CallBufferState {
    xencall_handle* h;
    void* p;
};
inline void free_call_buffer(CallBufferState& b) {
    xencall_free_buffer(b.h, b.p);
}
class CallBuffer : Owner<CallBufferState, free_call_buffer> {
  public:
    CallBuffer(xencall_handle* h, size_t size) : Owner(allocate(h, size)) {}
    void* get() const { return Owner::get().p; }

  private:
    static CallBufferState allocate(xencall_handle* h, size_t size) {
        void* p = xencall_alloc_buffer(h, size);
        if (!p)
            throw_errno("allocating a hypercall buffer (xencall_alloc_buffer)");
        return {h, p};
    }
};

// Frames of a domain's resource (XENMEM_acquire_resource) mapped here.
struct MappingState {
    xenforeignmemory_handle* fmem;
    xenforeignmemory_resource_handle* res;
    void* addr;
};
inline void unmap_resource(MappingState& m) {
    xenforeignmemory_unmap_resource(m.fmem, m.res);
}
class ResourceMapping : Owner<MappingState, unmap_resource> {
  public:
    ResourceMapping() = default;
    ResourceMapping(xenforeignmemory_handle* fmem, domid_t domid, unsigned type, unsigned id,
                    unsigned long frame, unsigned long nr_frames, const std::string& what)
        : Owner(map(fmem, domid, type, id, frame, nr_frames, what)) {}
    void* addr() const { return get().addr; }

  private:
    static MappingState map(xenforeignmemory_handle* fmem, domid_t domid, unsigned type,
                            unsigned id, unsigned long frame, unsigned long nr_frames,
                            const std::string& what) {
        void* addr = nullptr;
        auto* res = xenforeignmemory_map_resource(fmem, domid, type, id, frame, nr_frames, &addr,
                                                  PROT_READ | PROT_WRITE, 0);
        if (!res)
            throw_errno(what + " (xenforeignmemory_map_resource)");
        return {fmem, res, addr};
    }
};

// A local event channel port bound to remote port `remote` of a domain.
struct BindingState {
    xenevtchn_handle* h;
    evtchn_port_t local;
};
inline void unbind_evtchn(BindingState& b) {
    xenevtchn_unbind(b.h, b.local);
}
class EvtchnBinding : Owner<BindingState, unbind_evtchn> {
  public:
    EvtchnBinding() = default;
    EvtchnBinding(xenevtchn_handle* h, domid_t domid, evtchn_port_t remote, const std::string& what)
        : Owner(bind(h, domid, remote, what)) {}
    evtchn_port_t local() const { return get().local; }

  private:
    static BindingState bind(xenevtchn_handle* h, domid_t domid, evtchn_port_t remote,
                             const std::string& what) {
        xenevtchn_port_or_error_t p = xenevtchn_bind_interdomain(h, domid, remote);
        if (p < 0)
            throw_errno(what + " (xenevtchn_bind_interdomain)");
        return {h, static_cast<evtchn_port_t>(p)};
    }
};

// An ioreq server of a domain, created with synchronous ioreqs only.
// Destroying it also disables it; that fails harmlessly when the domain is
// gone already.
struct ServerState {
    xendevicemodel_handle* dm;
    domid_t domid;
    ioservid_t id;
};
inline void destroy_ioreq_server(ServerState& s) {
    xendevicemodel_destroy_ioreq_server(s.dm, s.domid, s.id);
}
class IoreqServer : Owner<ServerState, destroy_ioreq_server> {
  public:
    IoreqServer() = default;
    IoreqServer(xendevicemodel_handle* dm, domid_t domid) : Owner(create(dm, domid)) {}
    ioservid_t id() const { return get().id; }

    void enable() {
        const ServerState& s = get();
        if (xendevicemodel_set_ioreq_server_state(s.dm, s.domid, s.id, 1) < 0)
            throw_errno("enabling the ioreq server (xendevicemodel_set_ioreq_server_state)");
    }

  private:
    static ServerState create(xendevicemodel_handle* dm, domid_t domid) {
        ioservid_t id = 0;
        if (xendevicemodel_create_ioreq_server(dm, domid, HVM_IOREQSRV_BUFIOREQ_OFF, &id) < 0)
            throw_errno("creating an ioreq server (xendevicemodel_create_ioreq_server)");
        return {dm, domid, id};
    }
};

} // namespace busprof::xen
