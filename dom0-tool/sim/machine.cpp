// SPDX-License-Identifier: GPL-2.0-only
#include "machine.h"

#include "error.h"

#include <ctime>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

namespace busprof::sim {

namespace {
constexpr uint32_t kMagic = 0x6d507542; // "BuPm"
constexpr uint32_t kVersion = 1;

uint64_t monotonic_ns() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}
} // namespace

// The shared region.  Both processes run the same build, but the header is
// checked anyway so that a wrong fd fails cleanly instead of corrupting.
struct MachineState {
    uint32_t magic;
    uint32_t version;
    uint32_t size;
    uint32_t pad;
    // Robust: a daemon killed in the middle of an access must not leave
    // the simulator's pass-through waiting on the lock forever.
    pthread_mutex_t mu;
    MachineLayout layout; // under mu
    uint8_t uart[8];      // 16550 registers, the scratch register (+7) included
    uint8_t cmos_index;   // always < 128
    uint8_t cmos[128];
    uint8_t latency[16];
};

namespace {

class Lock {
  public:
    explicit Lock(pthread_mutex_t* mu) : mu_(mu) {
        // The previous owner died mid-access: the bytes it wrote are as
        // good as a device's after an interrupted bus cycle.
        if (::pthread_mutex_lock(mu_) == EOWNERDEAD)
            ::pthread_mutex_consistent(mu_);
    }
    ~Lock() { ::pthread_mutex_unlock(mu_); }
    Lock(const Lock&) = delete;

  private:
    pthread_mutex_t* mu_;
};

MachineState* map_state(int fd) {
    void* p = ::mmap(nullptr, sizeof(MachineState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        throw_errno("mmap of the simulated machine");
    return static_cast<MachineState*>(p);
}

} // namespace

Machine::Machine(const MachineLayout& layout) {
    fd_ = FD(::memfd_create("busprof-machine", MFD_CLOEXEC));
    if (!fd_)
        throw_errno("memfd_create");
    if (::ftruncate(fd_.get(), sizeof(MachineState)) < 0)
        throw_errno("ftruncate");
    s_ = map_state(fd_.get());
    pthread_mutexattr_t a;
    ::pthread_mutexattr_init(&a);
    ::pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    ::pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    ::pthread_mutex_init(&s_->mu, &a);
    ::pthread_mutexattr_destroy(&a);
    s_->layout = layout;
    s_->size = sizeof(MachineState);
    s_->version = kVersion;
    s_->magic = kMagic;
}

Machine::Machine(FD fd) : fd_(std::move(fd)) {
    struct stat st;
    if (::fstat(fd_.get(), &st) < 0)
        throw_errno("fstat of the simulated machine");
    if (st.st_size < static_cast<off_t>(sizeof(MachineState)))
        throw SystemError("the simulated machine's region is too small", EPROTO);
    s_ = map_state(fd_.get());
    if (s_->magic != kMagic || s_->version != kVersion || s_->size != sizeof(MachineState)) {
        ::munmap(s_, sizeof(MachineState));
        s_ = nullptr;
        throw SystemError("not a simulated machine of this busprof version", EPROTO);
    }
}

Machine::~Machine() {
    if (s_)
        ::munmap(s_, sizeof(MachineState));
}

MachineLayout Machine::layout() const {
    Lock lk(&s_->mu);
    return s_->layout;
}

void Machine::configure(const MachineLayout& layout) {
    Lock lk(&s_->mu);
    s_->layout = layout;
}

uint32_t Machine::access(uint16_t port, unsigned size, bool write, uint32_t value) {
    uint32_t result = 0;
    uint64_t spin_ns = 0;
    {
        Lock lk(&s_->mu);
        for (unsigned i = 0; i < size && i < 4; i++) {
            auto b = static_cast<uint8_t>(value >> (8 * i));
            uint8_t r = byte(static_cast<uint16_t>(port + i), write, b, &spin_ns);
            result |= static_cast<uint32_t>(r) << (8 * i);
        }
    }
    // The slow device's time is spent outside the lock, so that a long
    // latency setting never stalls an access to another device.
    if (spin_ns) {
        uint64_t until = monotonic_ns() + spin_ns;
        while (monotonic_ns() < until)
            ;
    }
    return write ? 0 : result;
}

// mu held.  Offsets are computed in int so that a base near 0xffff cannot
// wrap around onto low ports.
uint8_t Machine::byte(uint16_t port, bool write, uint8_t v, uint64_t* spin_ns) {
    const MachineLayout& l = s_->layout;
    int uart = static_cast<int>(port) - l.uart_base;
    int lat = static_cast<int>(port) - l.latency_base;

    if (uart >= 0 && uart < 8) {
        // 16550: LSR reports the transmitter empty, IIR no interrupt; the
        // other registers keep what is written.
        if (write) {
            if (uart != 5 && uart != 2)
                s_->uart[uart] = v;
            return 0;
        }
        return uart == 5 ? 0x60 : uart == 2 ? 0x01 : s_->uart[uart];
    }
    if (port == 0x70 || port == 0x71) {
        // CMOS: the index port's top bit is the NMI mask, not index.
        uint8_t idx = s_->cmos_index & 0x7f;
        if (port == 0x70)
            return write ? (s_->cmos_index = v & 0x7f, 0) : idx;
        return write ? (s_->cmos[idx] = v, 0) : s_->cmos[idx];
    }
    if (lat >= 0 && lat < 16) {
        *spin_ns += l.latency_ns;
        return write ? (s_->latency[lat] = v, 0) : s_->latency[lat];
    }
    return 0xff; // nothing decodes it
}

} // namespace busprof::sim
