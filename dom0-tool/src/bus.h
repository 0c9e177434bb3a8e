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
};

// port: the real inb/outb of dom0, with ioperm() for exactly the trapped ranges.
std::unique_ptr<Bus> make_port_bus();

// sim: device models.  latency_ns: extra time each access to the latency
// device takes.
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
