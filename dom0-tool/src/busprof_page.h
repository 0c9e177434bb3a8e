/* SPDX-License-Identifier: GPL-2.0-only */
// The busprof page (public/busprof.h, struct xen_busprof_page) behind a
// small typed view: its control ring, its per-vCPU stamps and its loss
// counter, read and written with the orderings that are the protocol.
//
// Xen (the hypervisor core, in C) is the writer: it fills a ring slot or a
// vCPU's stamp fields, then publishes them with a release (smp_wmb() and a
// store) of ctrl_prod, seq or resume_seq.  The profiler reads that counter
// with acquire and then the fields, and gives ring slots back with a
// release store of ctrl_cons.  A trap stamp is read after the vCPU's ioreq
// state said READY (ioreq_slot.h), which Xen publishes after the stamp:
// that acquire orders it, the fence after it keeps what follows in place.
// The page's header (version, clock) is written once, before it is mapped.
#pragma once

#include <cstdint>
#include <type_traits>

extern "C" {
#include <busprof.h>
}

namespace busprof {

class BusprofPage {
  public:
    BusprofPage() = default;
    explicit BusprofPage(xen_busprof_page* p) : p_(p) {}

    // ---- The header.
    uint32_t version() const { return p_->version; }
    // Interface 1.1 on: the stamps say which task on which pCPU.
    bool says_who() const { return version() >= 0x00010001u; }
    // Interface 1.2 on: Xen takes extended records in an extract reply.
    bool takes_extended_records() const { return version() >= 0x00010002u; }
    // Interface 1.3 on: memory-mapped spans, wide records and messages.
    bool knows_mmio() const { return version() >= 0x00010003u; }
    uint32_t tsc_khz() const { return p_->tsc_khz; }
    // The stamps are dom0's CLOCK_MONOTONIC in ns.
    bool stamps_dom0_clock() const { return p_->flags & XEN_BUSPROF_PAGE_CLOCK_MONOTONIC; }
    // The stamps are the host's TSC, which dom0 reads too.
    bool stamps_tsc() const { return p_->flags & XEN_BUSPROF_PAGE_CLOCK_TSC; }

    // ---- The profiler's side.

    // The span of a message with XEN_BUSPROF_CTRL_WIDE (interface 1.3),
    // from ctrl_span[] and ctrl_space[]; for any other message the ports
    // of first and last, space PIO.
    struct Span {
        uint64_t first, last;
        uint32_t space;
    };

    // Hands each control message Xen posted since the last call to
    // on_msg, oldest first, each slot given back before its message is
    // handled (and its span read before that: Xen may reuse the slot).
    // on_msg takes the message, or the message and its Span.  A ring that
    // claims more than it holds is read from its last
    // XEN_BUSPROF_CTRL_RING_SIZE messages.
    template <class F> void take_ctrl(F&& on_msg) {
        uint32_t prod = __atomic_load_n(&p_->ctrl_prod, __ATOMIC_ACQUIRE);
        uint32_t cons = p_->ctrl_cons;
        if (prod - cons > XEN_BUSPROF_CTRL_RING_SIZE)
            cons = prod - XEN_BUSPROF_CTRL_RING_SIZE;
        while (cons != prod) {
            const unsigned i = cons % XEN_BUSPROF_CTRL_RING_SIZE;
            xen_busprof_ctrl_msg m = p_->ring[i];
            Span span{m.first, m.last, XEN_BUSPROF_SPACE_PIO};
            if (m.flags & XEN_BUSPROF_CTRL_WIDE)
                span = {p_->ctrl_span[i].first, p_->ctrl_span[i].last, p_->ctrl_space[i]};
            cons++;
            __atomic_store_n(&p_->ctrl_cons, cons, __ATOMIC_RELEASE);
            if constexpr (std::is_invocable_v<F, const xen_busprof_ctrl_msg&, const Span&>)
                on_msg(m, span);
            else
                on_msg(m);
        }
    }
    // Control messages lost to a full ring so far (it wraps).
    uint32_t ctrl_lost() const { return __atomic_load_n(&p_->ctrl_lost, __ATOMIC_ACQUIRE); }

    // vCPU v's last routing decision: the count of them (seq), where and
    // when the access trapped, and who made it (interface 1.1 on).
    struct Trap {
        uint64_t seq, rip, tsc;
        uint64_t task;
        uint32_t pcpu;
    };
    // Read once v's ioreq state said READY.
    Trap trap(unsigned v) const {
        const xen_busprof_stamp& st = p_->stamp[v];
        const xen_busprof_who& who = p_->who[v];
        Trap t{st.seq, st.rip, st.tsc_trap, who.task, who.pcpu};
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        return t;
    }
    // The accesses of vCPU v that Xen routed to the profiler so far.
    uint64_t routed(unsigned v) const {
        return __atomic_load_n(&p_->stamp[v].seq, __ATOMIC_ACQUIRE);
    }
    // Whether vCPU v resumed from its access number seq; then resume_tsc(v)
    // is when.
    bool resumed_from(unsigned v, uint64_t seq) const {
        return __atomic_load_n(&p_->stamp[v].resume_seq, __ATOMIC_ACQUIRE) == seq;
    }
    uint64_t resume_tsc(unsigned v) const { return p_->stamp[v].tsc_resume; }

    // ---- Xen's side, as the hypervisor core does it (for tests).

    void post_ctrl(const xen_busprof_ctrl_msg& m, const Span* wide = nullptr) {
        uint32_t prod = p_->ctrl_prod;
        const unsigned i = prod % XEN_BUSPROF_CTRL_RING_SIZE;
        p_->ring[i] = m;
        p_->ctrl_span[i] = {wide ? wide->first : 0, wide ? wide->last : 0};
        p_->ctrl_space[i] = static_cast<uint8_t>(wide ? wide->space : 0);
        if (wide)
            p_->ring[i].flags |= XEN_BUSPROF_CTRL_WIDE;
        __atomic_store_n(&p_->ctrl_prod, prod + 1, __ATOMIC_RELEASE);
    }
    void lose_ctrl(uint32_t lost) { __atomic_store_n(&p_->ctrl_lost, lost, __ATOMIC_RELEASE); }
    void stamp_trap(unsigned v, uint64_t rip, uint64_t tsc, uint64_t task) {
        xen_busprof_stamp& st = p_->stamp[v];
        st.rip = rip;
        st.tsc_trap = tsc;
        p_->who[v].task = task;
        __atomic_store_n(&st.seq, st.seq + 1, __ATOMIC_RELEASE);
    }
    void stamp_resume(unsigned v, uint64_t tsc) {
        xen_busprof_stamp& st = p_->stamp[v];
        st.tsc_resume = tsc;
        __atomic_store_n(&st.resume_seq, st.seq, __ATOMIC_RELEASE);
    }

  private:
    xen_busprof_page* p_ = nullptr;
};

} // namespace busprof
