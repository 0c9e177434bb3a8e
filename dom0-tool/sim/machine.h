/* SPDX-License-Identifier: GPL-2.0-only */
// The simulated machine's devices: on ports a 16550 UART with its scratch
// register, CMOS NVRAM behind 0x70/0x71 and a device of configurable
// latency; memory-mapped, a device modelled on QEMU's edu (docs/specs/edu.rst)
// in a 1 MiB BAR at guest-physical kEduBase.
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
    uint64_t factorial_ns = 20000; // the edu device's factorial computation
};

// The memory-mapped device, at the guest-physical address where QEMU's PC
// machine puts the first BAR of a PCI device: its registers, as QEMU's edu
// device has them.  Offsets 0x00-0x7f take 4-byte accesses only (others
// read all ones and write nothing, as on edu); kEduScratch takes 1, 2, 4
// and 8 bytes; the rest of the BAR reads all ones.
constexpr uint64_t kEduBase = 0xfebf0000;
constexpr uint64_t kEduSize = 0x100000;
constexpr uint64_t kEduId = 0x00;        // reads 0x010000ed (edu 1.0)
constexpr uint64_t kEduLiveness = 0x04;  // reads the inverse of what was written
constexpr uint64_t kEduFactorial = 0x08; // a write computes its factorial, read back here
constexpr uint64_t kEduStatus = 0x20;    // bit 0: computing (read only); bit 7 kept
constexpr uint64_t kEduScratch = 0x80;   // 8 bytes that keep what is written
constexpr uint32_t kEduIdValue = 0x010000ed;
constexpr uint32_t kEduBusy = 0x01;

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
    // One memory-mapped access of size 1, 2, 4 or 8 at guest-physical addr,
    // exactly that wide.  Returns the value read (all ones where nothing
    // decodes it); the return value of a write is 0.
    uint64_t mmio(uint64_t addr, unsigned size, bool write, uint64_t value);

    MachineLayout layout() const;
    void configure(const MachineLayout& layout);
    int fd() const { return fd_.get(); }

  private:
    uint8_t byte(uint16_t port, bool write, uint8_t v, uint64_t* spin_ns);

    FD fd_;
    MachineState* s_ = nullptr;
};

} // namespace busprof::sim
