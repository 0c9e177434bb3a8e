/* SPDX-License-Identifier: GPL-2.0-only */
// Bus backends: where the daemon performs a guest's access for real.
#pragma once

#include "fd.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace busprof {

class Bus {
  public:
    virtual ~Bus() = default;
    virtual std::string name() const = 0;
    // Called when a range becomes trapped / untrapped (port: ioperm).
    virtual void grant(uint16_t first, uint16_t last) = 0;
    virtual void revoke(uint16_t first, uint16_t last) = 0;
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
// The devices are those of the simulated machine that busprof-simxen
// published (publish_sim_machine), or the bus's own when there is none;
// the config sets them up at the bus's first use.
std::unique_ptr<Bus> make_sim_bus(const SimBusConfig& cfg);

// The simulated machine of this dom0: the region busprof-simxen hands to a
// dom0 connection.  Sim buses made before and after it use it from their
// first access on; an empty fd withdraws it.  Throws SystemError if fd is
// not such a region.
void publish_sim_machine(FD fd);

} // namespace busprof
