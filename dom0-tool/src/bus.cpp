#include "bus.h"

#include "clock.h"
#include "error.h"

#include <array>
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
    void revoke(uint16_t first, uint16_t last) override {
        ::ioperm(first, last - first + 1u, 0);
    }
    void access(uint16_t port, unsigned size, bool write, uint32_t* value) override {
        if (write) {
            switch (size) {
            case 1: outb(static_cast<uint8_t>(*value), port); break;
            case 2: outw(static_cast<uint16_t>(*value), port); break;
            default: outl(*value, port); break;
            }
        } else {
            switch (size) {
            case 1: *value = inb(port); break;
            case 2: *value = inw(port); break;
            default: *value = inl(port); break;
            }
        }
    }
};

// ------------------------------------------------------------------ sim

// 16550: registers keep what is written, the scratch register (+7) included;
// LSR (+5) reports the transmitter empty; THR writes are collected.
class Uart {
  public:
    uint8_t read(unsigned reg) {
        if (reg == 5)
            return 0x60; // THRE | TEMT
        if (reg == 2)
            return 0x01; // IIR: no interrupt pending
        return regs_[reg];
    }
    void write(unsigned reg, uint8_t v) { regs_[reg] = v; }

  private:
    std::array<uint8_t, 8> regs_{};
};

// CMOS NVRAM behind an index port (0x70) and a data port (0x71).
class Cmos {
  public:
    uint8_t read(unsigned reg) { return reg == 0 ? index_ : nvram_[index_ & 0x7f]; }
    void write(unsigned reg, uint8_t v) {
        if (reg == 0)
            index_ = v & 0x7f;
        else
            nvram_[index_] = v;
    }

  private:
    uint8_t index_ = 0;
    std::array<uint8_t, 128> nvram_{};
};

class SimBus : public Bus {
  public:
    explicit SimBus(const SimBusConfig& c) : cfg_(c) {}
    std::string name() const override { return "sim"; }
    void grant(uint16_t, uint16_t) override {}
    void revoke(uint16_t, uint16_t) override {}

    void access(uint16_t port, unsigned size, bool write, uint32_t* value) override {
        // A wide access is that many byte accesses, as on an 8-bit device.
        uint32_t result = 0;
        for (unsigned i = 0; i < size; i++) {
            uint8_t b = static_cast<uint8_t>(*value >> (8 * i));
            uint8_t r = byte(static_cast<uint16_t>(port + i), write, b);
            result |= static_cast<uint32_t>(r) << (8 * i);
        }
        if (!write)
            *value = result;
    }

  private:
    uint8_t byte(uint16_t port, bool write, uint8_t v) {
        if (port >= cfg_.uart_base && port < cfg_.uart_base + 8) {
            unsigned reg = port - cfg_.uart_base;
            return write ? (uart_.write(reg, v), 0) : uart_.read(reg);
        }
        if (port == 0x70 || port == 0x71)
            return write ? (cmos_.write(port - 0x70u, v), 0) : cmos_.read(port - 0x70u);
        if (port >= cfg_.latency_base && port < cfg_.latency_base + 16) {
            // A slow device: spin for the configured time, keep the value.
            uint64_t until = now_ns() + cfg_.latency_ns;
            while (now_ns() < until)
                ;
            auto& cell = latency_regs_[port - cfg_.latency_base];
            return write ? (cell = v, 0) : cell;
        }
        return 0xff; // nothing decodes it
    }

    SimBusConfig cfg_;
    Uart uart_;
    Cmos cmos_;
    std::array<uint8_t, 16> latency_regs_{};
};

} // namespace

std::unique_ptr<Bus> make_port_bus() { return std::make_unique<PortBus>(); }
std::unique_ptr<Bus> make_sim_bus(const SimBusConfig& cfg) { return std::make_unique<SimBus>(cfg); }

} // namespace busprof
