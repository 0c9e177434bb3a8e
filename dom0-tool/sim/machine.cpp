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
constexpr uint32_t kVersion = 2;

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
    // The edu device.
    uint32_t edu_liveness;
    uint32_t edu_factorial; // the operand, until the computation is done
    uint32_t edu_status;
    uint64_t edu_done_ns; // when the computation ends (monotonic ns); 0: none
    uint64_t edu_scratch;
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

namespace {
uint32_t factorial(uint32_t n) {
    uint32_t f = 1;
    for (uint32_t i = 2; i <= n && f; i++)
        f *= i; // modulo 2^32, as the device's 32-bit register holds it
    return f;
}

uint64_t ones(unsigned size) {
    return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
}
} // namespace

uint64_t Machine::mmio(uint64_t addr, unsigned size, bool write, uint64_t value) {
    if (size != 1 && size != 2 && size != 4 && size != 8)
        return write ? 0 : ones(8);
    value &= ones(size);
    if (addr < kEduBase || addr - kEduBase >= kEduSize || addr - kEduBase > kEduSize - size)
        return write ? 0 : ones(size);
    const uint64_t off = addr - kEduBase;
    Lock lk(&s_->mu);
    // The computation ends on its own time, seen by whoever looks next.
    if (s_->edu_done_ns && monotonic_ns() >= s_->edu_done_ns) {
        s_->edu_factorial = factorial(s_->edu_factorial);
        s_->edu_status &= ~kEduBusy;
        s_->edu_done_ns = 0;
    }
    if (off >= kEduScratch && off + size <= kEduScratch + 8) {
        const unsigned shift = static_cast<unsigned>(8 * (off - kEduScratch));
        if (!write)
            return (s_->edu_scratch >> shift) & ones(size);
        s_->edu_scratch = (s_->edu_scratch & ~(ones(size) << shift)) | (value << shift);
        return 0;
    }
    if (off >= kEduScratch || size != 4 || off % 4)
        return write ? 0 : ones(size);
    const auto v = static_cast<uint32_t>(value);
    switch (off) {
    case kEduId:
        return write ? 0 : kEduIdValue;
    case kEduLiveness:
        return write ? (s_->edu_liveness = v, 0) : ~s_->edu_liveness;
    case kEduFactorial:
        if (!write)
            return s_->edu_factorial;
        if (!(s_->edu_status & kEduBusy)) { // edu ignores a write while computing
            s_->edu_factorial = v;
            s_->edu_status |= kEduBusy;
            s_->edu_done_ns = monotonic_ns() + s_->layout.factorial_ns;
        }
        return 0;
    case kEduStatus:
        if (!write)
            return s_->edu_status;
        s_->edu_status = (s_->edu_status & kEduBusy) | (v & 0x80);
        return 0;
    default:
        return write ? 0 : ones(size);
    }
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
