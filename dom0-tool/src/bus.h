/* SPDX-License-Identifier: GPL-2.0-only */
// Bus backends: where the daemon performs a guest's access for real.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace busprof {

namespace sim {
class Machine;
}

class Bus {
  public:
    virtual ~Bus() = default;
    virtual std::string name() const = 0;
    // Called when a range becomes trapped (port: ioperm); kept to the end.
    virtual void grant(uint16_t first, uint16_t last) = 0;
    // One access; for reads, *value receives the result.
    virtual void access(uint16_t port, unsigned size, bool write, uint32_t* value) = 0;

    // Memory-mapped (interface 1.3).  Called when a span [first, last] of
    // guest-physical pages becomes trapped, which Xen checked against the
    // domain's policy and iomem permission; kept to the end.  Throws
    // SystemError where the bus cannot reach it (the default: EOPNOTSUPP).
    virtual void grant_mmio(uint64_t first, uint64_t last);
    // One access of size 1, 2, 4 or 8 bytes inside a granted span, exactly
    // that wide; for reads, *value receives the result.  false: not inside
    // a granted span (nothing was accessed).
    virtual bool mmio(uint64_t addr, unsigned size, bool write, uint64_t* value);
};

// port: the real inb/outb of dom0, with ioperm() for exactly the trapped
// ranges; memory-mapped spans through an MmioBus (mmio_bus.h).
std::unique_ptr<Bus> make_port_bus();

// sim: device models (memory-mapped: the machine's edu device).  latency_ns: extra time each access
// to the latency device takes.
struct SimBusConfig {
    uint16_t uart_base = 0x3f8;    // 16550 UART, 8 ports; scratch at +7
    uint16_t latency_base = 0x300; // latency device, 16 ports
    uint64_t latency_ns = 2000;
};
// The devices are those of machine, the simulated hypervisor's
// (Hypervisor::simulated_machine()), or the bus's own without one; the
// config sets them up at the bus's first use.
std::unique_ptr<Bus> make_sim_bus(const SimBusConfig& cfg,
                                  std::shared_ptr<sim::Machine> machine = nullptr);

} // namespace busprof
