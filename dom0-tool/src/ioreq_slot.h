/* SPDX-License-Identifier: GPL-2.0-only */
// The state of an ioreq slot, read and written as one atomic byte.
//
// A slot of the ioreq page is shared between the requester (Xen, the
// simulator, a test's thread) and the ioreq server; its state says whose
// turn it is.  Xen's public ioreq.h declares it a 4-bit field of the byte
// it shares with data_is_ptr, dir and df, which only the requester writes,
// and only before the state says READY.  A plain bit-field access cannot
// be atomic, so these read and write that whole byte with acquire and
// release ordering: the slot's other fields, written before a state and
// read after it, are ordered by it (and ThreadSanitizer sees that they
// are).  The byte and the field's bits are found from the declaration
// itself, not assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {
#include <xen/hvm/ioreq.h>
}

namespace busprof {

namespace detail {
struct StateByte {
    size_t offset;
    uint8_t mask;
    unsigned shift;
};

inline const StateByte& state_byte() {
    static const StateByte b = [] {
        ioreq_t r;
        std::memset(&r, 0, sizeof(r));
        r.state = 0xf;
        const auto* bytes = reinterpret_cast<const uint8_t*>(&r);
        size_t i = 0;
        while (i < sizeof(r) - 1 && !bytes[i])
            i++;
        return StateByte{i, bytes[i], static_cast<unsigned>(__builtin_ctz(bytes[i] | 0x100))};
    }();
    return b;
}
} // namespace detail

// The slot's state; what the requester wrote before it is visible after.
inline uint8_t ioreq_state(const ioreq_t* p) {
    const auto& b = detail::state_byte();
    uint8_t v = __atomic_load_n(reinterpret_cast<const uint8_t*>(p) + b.offset, __ATOMIC_ACQUIRE);
    return static_cast<uint8_t>((v & b.mask) >> b.shift);
}

// Hands the slot over with state s; what was written before is visible to
// the side that reads s.  Only the side whose turn it is writes the slot.
inline void set_ioreq_state(ioreq_t* p, uint8_t s) {
    const auto& b = detail::state_byte();
    uint8_t* at = reinterpret_cast<uint8_t*>(p) + b.offset;
    uint8_t v = __atomic_load_n(at, __ATOMIC_RELAXED);
    v = static_cast<uint8_t>((v & ~b.mask) | ((s << b.shift) & b.mask));
    __atomic_store_n(at, v, __ATOMIC_RELEASE);
}

// The requester's side: the slot becomes r and is handed over with r's
// state.  Every field but the state's byte is copied first; that byte
// (state, data_is_ptr, dir, df) is stored last, in one atomic store.
inline void publish_ioreq(ioreq_t* p, const ioreq_t& r) {
    const auto& b = detail::state_byte();
    auto* dst = reinterpret_cast<uint8_t*>(p);
    const auto* src = reinterpret_cast<const uint8_t*>(&r);
    std::memcpy(dst, src, b.offset);
    std::memcpy(dst + b.offset + 1, src + b.offset + 1, sizeof(ioreq_t) - b.offset - 1);
    __atomic_store_n(dst + b.offset, src[b.offset], __ATOMIC_RELEASE);
}

} // namespace busprof
