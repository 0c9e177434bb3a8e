// SPDX-License-Identifier: GPL-2.0-only
#include "mmio_bus.h"

#include "error.h"

#include <cinttypes>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/mman.h>

namespace busprof {

namespace {

// One volatile access of exactly sizeof(T) bytes.
template <class T> uint64_t load(const uint8_t* p) {
    return *reinterpret_cast<const volatile T*>(p);
}
template <class T> void store(uint8_t* p, uint64_t v) {
    *reinterpret_cast<volatile T*>(p) = static_cast<T>(v);
}

FD open_rw(const std::string& path) {
    FD fd(::open(path.c_str(), O_RDWR | O_SYNC | O_CLOEXEC));
    if (!fd)
        throw SystemError("open " + path, errno);
    return fd;
}

} // namespace

MmioSource find_mmio_source(uint64_t first, uint64_t last, const std::string& pci_root) {
    namespace fs = std::filesystem;
    std::error_code ec;
    // Each line of a device's resource file is BAR i's start, end and flags.
    for (const auto& dev : fs::directory_iterator(pci_root, ec)) {
        std::ifstream in(dev.path() / "resource");
        std::string line;
        for (unsigned bar = 0; std::getline(in, line); bar++) {
            unsigned long long start = 0, end = 0;
            if (std::sscanf(line.c_str(), "%llx %llx", &start, &end) != 2 || !end)
                continue;
            if (first < start || last > end)
                continue;
            const fs::path file = dev.path() / ("resource" + std::to_string(bar));
            if (!fs::exists(file, ec))
                continue;
            return {open_rw(file.string()), start, file.string()};
        }
    }
    return {open_rw("/dev/mem"), 0, "/dev/mem"};
}

bool mmio_granted(const std::vector<MmioRange>& spans, uint64_t addr, unsigned size) {
    for (const auto& s : spans)
        if (addr >= s.first && size && addr + size - 1 <= s.last && addr + size - 1 >= addr)
            return true;
    return false;
}

MmioBus::MmioBus(MmioResolver resolve)
    : resolve_(resolve ? std::move(resolve) : MmioResolver([](uint64_t f, uint64_t l) {
          return find_mmio_source(f, l);
      })) {}

MmioBus::~MmioBus() {
    for (auto& w : windows_)
        ::munmap(w.map, w.last - w.first + 1);
}

void MmioBus::grant(uint64_t first, uint64_t last) {
    for (const auto& w : windows_)
        if (first >= w.first && last <= w.last)
            return;
    MmioSource src = resolve_(first, last);
    const size_t len = last - first + 1;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, src.fd.get(),
                     static_cast<off_t>(first - src.base));
    if (p == MAP_FAILED) {
        char what[96];
        std::snprintf(what, sizeof(what), "mmap 0x%" PRIx64 "-0x%" PRIx64 " of ", first, last);
        throw SystemError(what + src.path, errno);
    }
    windows_.push_back({first, last, static_cast<uint8_t*>(p), std::move(src.fd)});
}

bool MmioBus::access(uint64_t addr, unsigned size, bool write, uint64_t* value) {
    for (auto& w : windows_) {
        if (!mmio_granted({{w.first, w.last}}, addr, size))
            continue;
        uint8_t* p = w.map + (addr - w.first);
        switch (size) {
        case 1:
            write ? store<uint8_t>(p, *value) : void(*value = load<uint8_t>(p));
            return true;
        case 2:
            write ? store<uint16_t>(p, *value) : void(*value = load<uint16_t>(p));
            return true;
        case 4:
            write ? store<uint32_t>(p, *value) : void(*value = load<uint32_t>(p));
            return true;
        case 8:
            write ? store<uint64_t>(p, *value) : void(*value = load<uint64_t>(p));
            return true;
        default:
            return false;
        }
    }
    return false;
}

} // namespace busprof
