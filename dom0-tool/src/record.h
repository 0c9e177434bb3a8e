#pragma once

#include <cstdint>
#include <string>

namespace busprof {

// One transaction on its way to the DB (columns of table transactions).
struct Record {
    int64_t session_id;
    uint16_t domid;
    uint16_t vcpu;
    uint16_t port;
    uint8_t size;
    uint8_t dir;    // XEN_BUSPROF_DIR_*
    uint8_t status; // XEN_BUSPROF_STATUS_*
    uint32_t value;
    uint64_t rip;
    uint64_t t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns;
};

struct Marker {
    int64_t session_id;
    std::string kind;
    int vcpu; // -1: none
    int port_first, port_last; // -1: none
    uint64_t t_ns;
};

struct Event {
    int64_t session_id;
    std::string kind;
    uint64_t t_ns;
    std::string detail;
};

} // namespace busprof
