// SPDX-License-Identifier: GPL-2.0-only
#include "bus.h"

#include "error.h"
#include "machine.h"
#include "mmio_bus.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sys/io.h>

namespace busprof {

void Bus::grant_mmio(uint64_t, uint64_t) {
    throw SystemError("the " + name() + " bus has no memory-mapped devices", EOPNOTSUPP);
}

bool Bus::mmio(uint64_t, unsigned, bool, uint64_t*) {
    return false;
}

// ------------------------------------------------------------------ port

namespace {

class PortBus : public Bus {
  public:
    // Refuses at once where ports cannot be granted (no CAP_SYS_RAWIO):
    // otherwise each start_trap's grant would fail and every access the
    // guest made would end in Xen's timeout, reading all ones.  Port 0x80
    // (POST codes) is only asked for and given back, never accessed.
    PortBus() {
        if (::ioperm(0x80, 1, 1) < 0)
            throw UserError(std::string("the port bus cannot use I/O ports: ioperm: ") +
                                std::strerror(errno),
                            "run 'busprof daemon --bus port' as root (it needs CAP_SYS_RAWIO)");
        ::ioperm(0x80, 1, 0);
    }
    std::string name() const override { return "port"; }
    void grant(uint16_t first, uint16_t last) override {
        if (::ioperm(first, last - first + 1u, 1) < 0)
            throw SystemError("ioperm " + std::to_string(first) + "-" + std::to_string(last),
                              errno);
    }
    void grant_mmio(uint64_t first, uint64_t last) override { mmio_.grant(first, last); }
    bool mmio(uint64_t addr, unsigned size, bool write, uint64_t* value) override {
        return mmio_.access(addr, size, write, value);
    }
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

  private:
    MmioBus mmio_;
};

// ------------------------------------------------------------------ sim

// The devices are the simulated machine's (sim/machine.h).  A daemon on
// the simulated hypervisor performs its accesses on the machine that
// busprof-simxen hands out (Hypervisor::simulated_machine()), so that a
// port the hypervisor passes through and a trapped one reach the same
// device.  Without a simulator the bus has a machine of its own.
class SimBus : public Bus {
  public:
    SimBus(const SimBusConfig& c, std::shared_ptr<sim::Machine> m)
        : cfg_(c), machine_(std::move(m)) {}
    std::string name() const override { return "sim"; }
    void grant(uint16_t, uint16_t) override { machine(); }

    void access(uint16_t port, unsigned size, bool write, uint32_t* value) override {
        uint32_t r = machine().access(port, size, write, *value);
        if (!write)
            *value = r;
    }
    void grant_mmio(uint64_t first, uint64_t last) override {
        machine();
        granted_.push_back({first, last});
    }
    bool mmio(uint64_t addr, unsigned size, bool write, uint64_t* value) override {
        if (!mmio_granted(granted_, addr, size))
            return false;
        uint64_t r = machine().mmio(addr, size, write, *value);
        if (!write)
            *value = r;
        return true;
    }

  private:
    // Set up at first use, once the daemon is the domain's profiler: a
    // daemon that fails to attach leaves the machine as it was.
    sim::Machine& machine() {
        std::call_once(bound_, [this] {
            if (!machine_)
                machine_ = std::make_shared<sim::Machine>();
            // dom0's sim bus options set up the devices it profiles.
            machine_->configure({cfg_.uart_base, cfg_.latency_base, cfg_.latency_ns});
        });
        return *machine_;
    }

    SimBusConfig cfg_;
    std::vector<MmioRange> granted_;
    std::once_flag bound_;
    std::shared_ptr<sim::Machine> machine_;
};

} // namespace

std::unique_ptr<Bus> make_port_bus() {
    return std::make_unique<PortBus>();
}
std::unique_ptr<Bus> make_sim_bus(const SimBusConfig& cfg, std::shared_ptr<sim::Machine> machine) {
    return std::make_unique<SimBus>(cfg, std::move(machine));
}

} // namespace busprof
