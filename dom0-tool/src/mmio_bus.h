/* SPDX-License-Identifier: GPL-2.0-only */
// dom0's own accesses to a guest's device memory on real Xen: the spans a
// trap names, mapped from dom0 and accessed with exactly the width the
// guest used.
//
// Where the mapping comes from: the sysfs file resourceN of the PCI device
// whose BAR N covers the span (a driver such as pciback may own the
// device: the file maps the BAR all the same), else /dev/mem for a range
// no device claims (xl's iomem= can give any).  Guest-physical is taken as
// the machine address, as xl's iomem= maps it unless told otherwise
// (iomem=START,NUM@GFN); a domain with its device memory elsewhere is not
// served yet.
//
// Never memcpy: a device register read twice or in two halves is not the
// register read once.  Each access is one volatile load or store of 1, 2, 4
// or 8 bytes, which the compiler emits as one mov of that width.
#pragma once

#include "fd.h"
#include "ranges.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace busprof {

// A file to map device memory from: its offset 0 is machine address base.
struct MmioSource {
    FD fd;
    uint64_t base = 0;
    std::string path; // for messages
};
// Finds it for [first, last].  Throws SystemError.
using MmioResolver = std::function<MmioSource(uint64_t first, uint64_t last)>;

// The resolver of real Xen: the resourceN under pci_root
// (/sys/bus/pci/devices/*/) whose BAR covers [first, last], else /dev/mem.
MmioSource find_mmio_source(uint64_t first, uint64_t last,
                            const std::string& pci_root = "/sys/bus/pci/devices");

// Is [addr, addr + size) inside one of spans?
bool mmio_granted(const std::vector<MmioRange>& spans, uint64_t addr, unsigned size);

class MmioBus {
  public:
    // resolve: where each span is mapped from; find_mmio_source by default.
    explicit MmioBus(MmioResolver resolve = {});
    ~MmioBus();
    MmioBus(const MmioBus&) = delete;
    MmioBus& operator=(const MmioBus&) = delete;

    // Maps [first, last] (whole pages) unless a granted span covers it.
    // Throws SystemError.
    void grant(uint64_t first, uint64_t last);
    // One access of size 1, 2, 4 or 8 inside a granted span; false (and
    // nothing accessed) otherwise.
    bool access(uint64_t addr, unsigned size, bool write, uint64_t* value);

  private:
    struct Window {
        uint64_t first, last;
        uint8_t* map;
        FD fd;
    };
    MmioResolver resolve_;
    std::vector<Window> windows_;
};

} // namespace busprof
