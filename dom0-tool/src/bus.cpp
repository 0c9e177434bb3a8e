// SPDX-License-Identifier: GPL-2.0-only
#include "bus.h"

#include "error.h"
#include "machine.h"

#include <array>
#include <mutex>
#include <sys/io.h>

namespace busprof {

// ------------------------------------------------------------------ port

namespace {

class PortBus : public Bus {
  public:
    std::string name() const override { return "port"; }
    void grant(uint16_t first, uint16_t last) override {
        if (::ioperm(first, last - first + 1u, 1) < 0)
            throw SystemError("ioperm " + std::to_string(first) + "-" + std::to_string(last),
                              errno);
    }
    void revoke(uint16_t first, uint16_t last) override { ::ioperm(first, last - first + 1u, 0); }
    void access(uint16_t port, unsigned size, bool write, uint32_t* value) override {
        if (write) {
            switch (size) {
            case 1:
                outb(static_cast<uint8_t>(*value), port);
                break;
            case 2:
                outw(static_cast<uint16_t>(*value), port);
                break;
            default:
                outl(*value, port);
                break;
            }
        } else {
            switch (size) {
            case 1:
                *value = inb(port);
                break;
            case 2:
                *value = inw(port);
                break;
            default:
                *value = inl(port);
                break;
            }
        }
    }
};

// ------------------------------------------------------------------ sim

// The devices are the simulated machine's (sim/machine.h).  A daemon on
// the simulated hypervisor performs its accesses on the machine that
// busprof-simxen hands out (see publish_sim_machine), so that a port the
// hypervisor passes through and a trapped one reach the same device.
// Without a simulator the bus has a machine of its own.
std::mutex g_machine_mu;
std::shared_ptr<sim::Machine> g_machine;

class SimBus : public Bus {
  public:
    explicit SimBus(const SimBusConfig& c) : cfg_(c) {}
    std::string name() const override { return "sim"; }
    void grant(uint16_t, uint16_t) override { machine(); }
    void revoke(uint16_t, uint16_t) override {}

    void access(uint16_t port, unsigned size, bool write, uint32_t* value) override {
        uint32_t r = machine().access(port, size, write, *value);
        if (!write)
            *value = r;
    }

  private:
    // Bound at first use: the daemon makes its bus before it connects to
    // the hypervisor that publishes the machine.
    sim::Machine& machine() {
        std::call_once(bound_, [this] {
            {
                std::lock_guard lk(g_machine_mu);
                machine_ = g_machine;
            }
            if (!machine_)
                machine_ = std::make_shared<sim::Machine>();
            // dom0's sim bus options set up the devices it profiles.
            machine_->configure({cfg_.uart_base, cfg_.latency_base, cfg_.latency_ns});
        });
        return *machine_;
    }

    SimBusConfig cfg_;
    std::once_flag bound_;
    std::shared_ptr<sim::Machine> machine_;
};

} // namespace

std::unique_ptr<Bus> make_port_bus() {
    return std::make_unique<PortBus>();
}
std::unique_ptr<Bus> make_sim_bus(const SimBusConfig& cfg) {
    return std::make_unique<SimBus>(cfg);
}

void publish_sim_machine(FD fd) {
    std::shared_ptr<sim::Machine> m;
    if (fd)
        m = std::make_shared<sim::Machine>(std::move(fd));
    std::lock_guard lk(g_machine_mu);
    g_machine = std::move(m);
}

} // namespace busprof
