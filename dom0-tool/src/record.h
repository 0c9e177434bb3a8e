/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

extern "C" {
#include <busprof.h>
}

namespace busprof {

// One transaction on its way to the DB (columns of table transactions).
// session_id is the daemon's session ordinal until the writer stores it.
struct Record {
    int64_t session_id;
    uint16_t domid;
    uint16_t vcpu;
    uint16_t port;
    uint8_t size;
    uint8_t dir;    // XEN_BUSPROF_DIR_*
    uint8_t status; // XEN_BUSPROF_STATUS_*
    uint8_t flags;  // XEN_BUSPROF_RECORD_*
    uint32_t value;
    uint64_t rip;
    uint64_t t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns; // t_bus_*: 0 if no bus access
    uint64_t task;  // who: the guest's CR3 on Xen, its thread id on the simulator
    uint32_t pcpu;  // the physical CPU the vCPU ran on
    bool who_known; // task and pcpu came with Xen's stamp
    // Memory-mapped (interface 1.3): space XEN_BUSPROF_SPACE_MMIO, its
    // guest-physical address and 64-bit value (port is 0 and value the low
    // 32 bits then).  A port access has space PIO and neither.
    uint8_t space;
    uint64_t addr;
    uint64_t wide_value;
};

// How far a record's stamps from Xen's clock (t_trap, t_resume) contradict
// the daemon's (t_bus_*); 0: they agree.  The guest was trapped before the
// daemon saw the access and resumed after it answered, so on one clock
// t_trap <= t_bus_begin and t_bus_end <= t_resume always hold.
inline uint64_t clock_contradiction(const Record& r) {
    if (!r.t_bus_begin_ns)
        return 0; // no bus access: nothing of the daemon's to compare with
    uint64_t early = r.t_bus_end_ns > r.t_resume_ns ? r.t_bus_end_ns - r.t_resume_ns : 0;
    uint64_t late = r.t_trap_ns > r.t_bus_begin_ns ? r.t_trap_ns - r.t_bus_begin_ns : 0;
    return early > late ? early : late;
}

// Column text of transactions.dir / .status <-> XEN_BUSPROF_DIR_* / _STATUS_*.
inline const char* dir_name(uint8_t dir) {
    return dir == XEN_BUSPROF_DIR_IN ? "in" : "out";
}
inline uint8_t dir_from_name(const char* s) {
    return std::strcmp(s, "in") == 0 ? XEN_BUSPROF_DIR_IN : XEN_BUSPROF_DIR_OUT;
}
inline const char* status_name(uint8_t st) {
    return st == XEN_BUSPROF_STATUS_OK        ? "ok"
           : st == XEN_BUSPROF_STATUS_TIMEOUT ? "timeout"
                                              : "error";
}
inline uint8_t status_from_name(const char* s) {
    return std::strcmp(s, "ok") == 0        ? XEN_BUSPROF_STATUS_OK
           : std::strcmp(s, "timeout") == 0 ? XEN_BUSPROF_STATUS_TIMEOUT
                                            : XEN_BUSPROF_STATUS_ERROR;
}

struct Marker {
    int64_t session_id;
    std::string kind;
    int vcpu;                  // -1: none
    int port_first, port_last; // -1: none
    uint64_t t_ns;
    std::string cause;  // start/stop/pause/resume: what made it; empty: none
    std::string origin; // trap calls and extracts: "guest" or "dom0"; empty: none
    bool mmio = false;  // a memory-mapped span: addr_first, addr_last (ports -1)
    uint64_t addr_first = 0, addr_last = 0;
};

struct Event {
    int64_t session_id;
    std::string kind;
    uint64_t t_ns;
    std::string detail;
};

} // namespace busprof
