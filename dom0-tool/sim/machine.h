/* SPDX-License-Identifier: GPL-2.0-only */
// The simulated machine's port I/O devices: a 16550 UART with its scratch
// register, CMOS NVRAM behind 0x70/0x71 and a device of configurable latency.
//
// They are the hardware, so there is one of each per machine: their state
// lives in a shared memory region that busprof-simxen creates and hands to
// the daemon.  The simulated hypervisor reaches it for ports it passes
// through, the daemon's sim bus for the trapped accesses it performs, and a
// driver sees the same device with and without profiling.
#pragma once

#include "fd.h"

#include <cstdint>

namespace busprof::sim {

// Where the devices sit and how slow the latency device is.  Kept in the
// shared region: dom0 (the daemon's sim bus options) may reconfigure it.
struct MachineLayout {
    uint16_t uart_base = 0x3f8;    // 8 ports; scratch at +7
    uint16_t latency_base = 0x300; // 16 ports
    uint64_t latency_ns = 2000;    // per byte access to the latency device
};

struct MachineState;

class Machine {
  public:
    // A new machine in a fresh memfd (shared) region.  Throws SystemError.
    explicit Machine(const MachineLayout& layout = {});
    // The machine another process created, from its region's fd.  Throws
    // SystemError (EPROTO) if fd is not a machine region.
    explicit Machine(FD fd);
    ~Machine();
    Machine(const Machine&) = delete;
    Machine& operator=(const Machine&) = delete;

    // One port access of size 1, 2 or 4; a wide access is that many byte
    // accesses, as on an 8-bit device.  Returns the value read (all ones
    // where nothing decodes a byte); the return value of a write is 0.
    uint32_t access(uint16_t port, unsigned size, bool write, uint32_t value);

    MachineLayout layout() const;
    void configure(const MachineLayout& layout);
    int fd() const { return fd_.get(); }

  private:
    uint8_t byte(uint16_t port, bool write, uint8_t v, uint64_t* spin_ns);

    FD fd_;
    MachineState* s_ = nullptr;
};

} // namespace busprof::sim
