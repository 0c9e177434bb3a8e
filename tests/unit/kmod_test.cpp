// SPDX-License-Identifier: GPL-2.0-only
// busprof.ko's logic (guest-lib/linux/bp_core.c) over a scripted hypervisor
// and a fake clock, and the example driver module's record check
// (guest-lib/linux/kexample_check.c): the C files Kbuild builds into the
// modules, which cannot run here.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

extern "C" {
#include <busprof.h>

#include "bp_core.h"
#include "kexample_check.h"
}

namespace {

// A hypervisor that answers each call from a script and logs what it got.
struct FakeXen {
    struct Call {
        unsigned int cmd;
        xen_busprof_trap trap{};
        xen_busprof_extract extract{};
        xen_busprof_span span{};
        xen_busprof_extract_wide wide{};
    };
    // What extract hands back: `total` records in the snapshot, numbered 1..
    uint64_t total = 0;
    uint64_t snapshot = 7;
    long version = -EOPNOTSUPP; // what XEN_BUSPROF_version says: a Xen before 1.2
    std::deque<long> script;    // results to return first (e.g. -EAGAIN), then 0
    uint64_t now = 0;
    uint64_t slept_us = 0;
    std::vector<Call> calls;

    long op(unsigned int cmd, void* arg) {
        Call c{cmd};
        if (cmd == XEN_BUSPROF_version)
            return version;
        bool extract = cmd == XEN_BUSPROF_extract || cmd == XEN_BUSPROF_extract_ext;
        if (cmd == XEN_BUSPROF_start_trap || cmd == XEN_BUSPROF_stop_trap)
            std::memcpy(&c.trap, arg, sizeof(c.trap));
        if (extract)
            std::memcpy(&c.extract, arg, sizeof(c.extract));
        if (cmd == XEN_BUSPROF_start_trap_span || cmd == XEN_BUSPROF_stop_trap_span)
            std::memcpy(&c.span, arg, sizeof(c.span));
        if (cmd == XEN_BUSPROF_extract_wide)
            std::memcpy(&c.wide, arg, sizeof(c.wide));
        calls.push_back(c);
        if (!script.empty()) {
            long rc = script.front();
            script.pop_front();
            if (rc)
                return rc;
        }
        if (extract) {
            auto* x = static_cast<xen_busprof_extract*>(arg);
            uint64_t n = 0;
            for (uint64_t i = x->offset; i < total && n < x->nr; i++, n++) {
                xen_busprof_record_ext r{};
                r.rec.id = i + 1;
                r.rec.port = static_cast<uint16_t>(0x2f8 + i % 8);
                r.rec.flags = XEN_BUSPROF_RECORD_WHO;
                r.task = 0x10000 * (i + 1);
                r.pcpu = static_cast<uint32_t>(i % 2);
                // Xen writes the form the sub-op asked for.
                if (cmd == XEN_BUSPROF_extract_ext)
                    std::memcpy(reinterpret_cast<xen_busprof_record_ext*>(x->buffer.p) + n, &r,
                                sizeof(r));
                else
                    std::memcpy(x->buffer.p + n, &r.rec, sizeof(r.rec));
            }
            x->nr = static_cast<uint32_t>(n);
            x->total = total;
            x->snapshot = snapshot;
        }
        if (cmd == XEN_BUSPROF_extract_wide) {
            auto* x = static_cast<xen_busprof_extract_wide*>(arg);
            uint64_t n = 0;
            for (uint64_t i = x->offset; i < total && n < x->nr; i++, n++) {
                xen_busprof_record_wide r{};
                r.ext.rec.id = i + 1;
                r.ext.rec.size = 8;
                r.addr = x->span.first + 8 * i;
                r.value = 0x0123456789abcdefull + i;
                r.ext.rec.value = static_cast<uint32_t>(r.value);
                r.space = XEN_BUSPROF_SPACE_MMIO;
                x->buffer.p[n] = r;
            }
            x->nr = static_cast<uint32_t>(n);
            x->total = total;
            x->snapshot = snapshot;
        }
        return 0;
    }

    bp_env env() {
        return bp_env{[](void* ctx, unsigned int cmd, void* arg) {
                          return static_cast<FakeXen*>(ctx)->op(cmd, arg);
                      },
                      [](void* ctx) { return static_cast<FakeXen*>(ctx)->now; },
                      [](void* ctx, unsigned int us) {
                          auto* x = static_cast<FakeXen*>(ctx);
                          x->slept_us += us;
                          x->now += uint64_t{us} * 1000;
                      },
                      this, 0};
    }
};

TEST(KmodCore, RangeChecksRefuseBackwardsAndOversizedRanges) {
    EXPECT_EQ(bp_core_check_range(0x2f8, 0x2ff), 0);
    EXPECT_EQ(bp_core_check_range(0x2f8, 0x2f8), 0);
    EXPECT_EQ(bp_core_check_range(0, 0xffff), 0);
    EXPECT_EQ(bp_core_check_range(0x2ff, 0x2f8), -EINVAL);
    EXPECT_EQ(bp_core_check_range(0xfff8, 0x10000), -EINVAL);
}

TEST(KmodCore, TrapPassesTheRangeWithZeroFlagsAndReturnsXensErrno) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.script = {0, -EPERM};
    EXPECT_EQ(bp_core_trap(&e, XEN_BUSPROF_start_trap, 0x2f8, 0x2ff), 0);
    EXPECT_EQ(bp_core_trap(&e, XEN_BUSPROF_stop_trap, 0x3f8, 0x3ff), -EPERM);
    ASSERT_EQ(xen.calls.size(), 2u);
    EXPECT_EQ(xen.calls[0].cmd, unsigned{XEN_BUSPROF_start_trap});
    EXPECT_EQ(xen.calls[0].trap.first, 0x2f8);
    EXPECT_EQ(xen.calls[0].trap.last, 0x2ff);
    EXPECT_EQ(xen.calls[0].trap.flags, 0u);
    EXPECT_EQ(xen.calls[1].cmd, unsigned{XEN_BUSPROF_stop_trap});
}

TEST(KmodCore, BadRangeNeverReachesTheHypervisor) {
    FakeXen xen;
    bp_env e = xen.env();
    EXPECT_EQ(bp_core_trap(&e, XEN_BUSPROF_start_trap, 0x300, 0x2ff), -EINVAL);
    bp_record r{};
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x10000, &r, 1, nullptr), -EINVAL);
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, nullptr, 1, nullptr), -EINVAL);
    EXPECT_TRUE(xen.calls.empty());
}

TEST(KmodCore, VersionCheckWantsTheSameMajorAndNoNewerMinor) {
    EXPECT_EQ(bp_core_version_check(0x00010001, 0x00010001), 0);
    EXPECT_EQ(bp_core_version_check(0x00010001, 0x00010000), 0);
    EXPECT_EQ(bp_core_version_check(0x00010000, 0x00010001), -EPROTONOSUPPORT);
    EXPECT_EQ(bp_core_version_check(0x00020000, 0x00010000), -EPROTONOSUPPORT);
    EXPECT_EQ(bp_core_version_check(0x00010001, 0x00020001), -EPROTONOSUPPORT);
    // what bp_check_version() asks busprof.ko built from this tree
    EXPECT_EQ(bp_core_version_check(XEN_BUSPROF_INTERFACE_VERSION, BP_INTERFACE_VERSION), 0);
}

TEST(KmodCore, XenVersionIsZeroBefore12AndRefusesAnotherMajor) {
    FakeXen xen;
    bp_env e = xen.env();
    EXPECT_EQ(bp_core_xen_version(&e), 0); // -EOPNOTSUPP: older than 1.2
    xen.version = 0x00010002;
    EXPECT_EQ(bp_core_xen_version(&e), 0x00010002);
    xen.version = 0x00010007;
    EXPECT_EQ(bp_core_xen_version(&e), 0x00010007);
    xen.version = 0x00020000;
    EXPECT_EQ(bp_core_xen_version(&e), -EPROTONOSUPPORT);
    xen.version = -ENOSYS;
    EXPECT_EQ(bp_core_xen_version(&e), -ENOSYS);
}

// A Xen of 1.2: the extended sub-op, whose records say who made each access.
TEST(KmodCore, ExtractOfA12XenHandsBackTaskAndPcpu) {
    FakeXen xen;
    xen.total = 1500; // two chunks
    bp_env e = xen.env();
    e.xen_version = 0x00010002;
    std::vector<bp_record> recs(1600);
    size_t needed = 0;
    ASSERT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, recs.data(), recs.size(), &needed), 1500);
    EXPECT_EQ(needed, 1500u);
    ASSERT_EQ(xen.calls.size(), 2u);
    for (auto& c : xen.calls)
        EXPECT_EQ(c.cmd, unsigned{XEN_BUSPROF_extract_ext});
    for (uint64_t i = 0; i < 1500; i++) {
        ASSERT_EQ(recs[i].id, i + 1);
        ASSERT_EQ(recs[i].task, 0x10000 * (i + 1));
        ASSERT_EQ(recs[i].pcpu, i % 2);
        ASSERT_EQ(recs[i].flags, BP_RECORD_WHO);
    }
}

// A Xen before 1.2: plain records, widened in place, nothing said of who.
TEST(KmodCore, ExtractOfAnOlderXenWidensPlainRecordsInPlace) {
    FakeXen xen;
    xen.total = 1500;
    bp_env e = xen.env();
    std::vector<bp_record> recs(1600);
    std::memset(recs.data(), 0xaa, recs.size() * sizeof(recs[0]));
    ASSERT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, recs.data(), recs.size(), nullptr), 1500);
    ASSERT_EQ(xen.calls.size(), 2u);
    for (auto& c : xen.calls)
        EXPECT_EQ(c.cmd, unsigned{XEN_BUSPROF_extract});
    for (uint64_t i = 0; i < 1500; i++) {
        ASSERT_EQ(recs[i].id, i + 1);
        ASSERT_EQ(recs[i].port, 0x2f8 + i % 8);
        ASSERT_EQ(recs[i].task, 0u);
        ASSERT_EQ(recs[i].pcpu, 0u);
        ASSERT_EQ(recs[i].pad2, 0u);
        ASSERT_EQ(recs[i].flags, 0); // the plain record's WHO bit means nothing
    }
    EXPECT_EQ(recs[1500].id, 0xaaaaaaaaaaaaaaaaull); // past the count: untouched
}

TEST(KmodCore, PauseAsksAgainWhileTheControlRingIsFull) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.script = {-EAGAIN, -EAGAIN, -EAGAIN};
    EXPECT_EQ(bp_core_pause(&e, XEN_BUSPROF_pause), 0);
    EXPECT_EQ(xen.calls.size(), 4u);
    EXPECT_GT(xen.slept_us, 0u);
}

TEST(KmodCore, PauseGivesUpAfterASecondWithEtimedout) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.script.assign(100000, -EAGAIN);
    EXPECT_EQ(bp_core_pause(&e, XEN_BUSPROF_resume), -ETIMEDOUT);
    EXPECT_GE(xen.now, BP_PAUSE_DEADLINE_NS);
    EXPECT_LT(xen.now, BP_PAUSE_DEADLINE_NS + 1000000);
}

TEST(KmodCore, PauseReturnsOtherErrorsAtOnce) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.script = {-ENXIO};
    EXPECT_EQ(bp_core_pause(&e, XEN_BUSPROF_pause), -ENXIO);
    EXPECT_EQ(xen.calls.size(), 1u);
}

TEST(KmodCore, ExtractRepeatsTheIdenticalCallUntilTheProfilerAnswers) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.total = 3;
    xen.script = {-EAGAIN, -EBUSY, -EAGAIN};
    bp_record r[4] = {};
    size_t needed = 0;
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, r, 4, &needed), 3);
    EXPECT_EQ(needed, 3u);
    EXPECT_EQ(r[2].id, 3u);
    ASSERT_EQ(xen.calls.size(), 4u);
    for (const auto& c : xen.calls) {
        EXPECT_EQ(c.extract.first, 0x2f8);
        EXPECT_EQ(c.extract.last, 0x2ff);
        EXPECT_EQ(c.extract.nr, 4u);
        EXPECT_EQ(c.extract.offset, 0u);
        EXPECT_EQ(c.extract.snapshot, 0u);
    }
}

TEST(KmodCore, ExtractPagesThroughOneSnapshot) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.total = 2 * XEN_BUSPROF_EXTRACT_MAX + 5;
    std::vector<bp_record> r(xen.total);
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, r.data(), r.size(), nullptr),
              static_cast<ssize_t>(xen.total));
    ASSERT_EQ(xen.calls.size(), 3u);
    EXPECT_EQ(xen.calls[0].extract.snapshot, 0u);
    EXPECT_EQ(xen.calls[1].extract.offset, uint64_t{XEN_BUSPROF_EXTRACT_MAX});
    EXPECT_EQ(xen.calls[1].extract.snapshot, xen.snapshot);
    EXPECT_EQ(xen.calls[2].extract.offset, uint64_t{2 * XEN_BUSPROF_EXTRACT_MAX});
    EXPECT_EQ(xen.calls[2].extract.nr, r.size() - 2 * XEN_BUSPROF_EXTRACT_MAX);
    for (size_t i = 0; i < r.size(); i++)
        ASSERT_EQ(r[i].id, i + 1);
}

TEST(KmodCore, ExtractSaysHowManyWhenTheBufferIsTooSmall) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.total = 300;
    bp_record r{};
    size_t needed = 0;
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, &r, 1, &needed), -ENOBUFS);
    EXPECT_EQ(needed, 300u);
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, nullptr, 0, &needed), -ENOBUFS);
    xen.total = 0;
    needed = 99;
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, nullptr, 0, &needed), 0);
    EXPECT_EQ(needed, 0u);
}

TEST(KmodCore, ExtractTimesOutAfterThirtySeconds) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.script.assign(1000000, -EAGAIN);
    bp_record r{};
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, &r, 1, nullptr), -ETIMEDOUT);
    EXPECT_GT(xen.now, BP_EXTRACT_DEADLINE_NS);
    EXPECT_LT(xen.now, BP_EXTRACT_DEADLINE_NS + 2000000);
}

TEST(KmodCore, ExtractPassesOtherErrorsThrough) {
    FakeXen xen;
    bp_env e = xen.env();
    xen.script = {-EOPNOTSUPP};
    bp_record r{};
    EXPECT_EQ(bp_core_extract(&e, 0x2f8, 0x2ff, &r, 1, nullptr), -EOPNOTSUPP);
}

TEST(KmodCore, SpanChecksWantWholePagesBelow2To52) {
    EXPECT_EQ(bp_core_check_span(0xfea00000, 0xfea00fff), 0);
    EXPECT_EQ(bp_core_check_span(0xfea00000, 0xfeafffff), 0);
    EXPECT_EQ(bp_core_check_span(0xfea00004, 0xfea00fff), -EINVAL); // first not aligned
    EXPECT_EQ(bp_core_check_span(0xfea00000, 0xfea00ffe), -EINVAL); // last + 1 not aligned
    EXPECT_EQ(bp_core_check_span(0xfea01000, 0xfea00fff), -EINVAL); // backwards
    EXPECT_EQ(bp_core_check_span(1ull << 52, (1ull << 52) + 0xfff), -EINVAL);
    EXPECT_EQ(bp_core_check_span(0, ~0ull), -EINVAL); // last + 1 wraps to 0
}

TEST(KmodCore, TrapSpanPassesAMemoryMappedSpanWithZeroFlagsAndReturnsXensErrno) {
    FakeXen xen;
    bp_env e = xen.env();
    e.xen_version = 0x00010003;
    xen.script = {0, -EXDEV};
    EXPECT_EQ(bp_core_trap_span(&e, XEN_BUSPROF_start_trap_span, 0xfea00000, 0xfea00fff), 0);
    EXPECT_EQ(bp_core_trap_span(&e, XEN_BUSPROF_stop_trap_span, 0xfee00000, 0xfee00fff), -EXDEV);
    ASSERT_EQ(xen.calls.size(), 2u);
    EXPECT_EQ(xen.calls[0].cmd, unsigned{XEN_BUSPROF_start_trap_span});
    EXPECT_EQ(xen.calls[0].span.first, 0xfea00000u);
    EXPECT_EQ(xen.calls[0].span.last, 0xfea00fffu);
    EXPECT_EQ(xen.calls[0].span.space, unsigned{XEN_BUSPROF_SPACE_MMIO});
    EXPECT_EQ(xen.calls[0].span.flags, 0u);
    EXPECT_EQ(xen.calls[1].cmd, unsigned{XEN_BUSPROF_stop_trap_span});
    EXPECT_EQ(xen.calls[1].span.first, 0xfee00000u);
}

// A Xen before 1.3 knows no spans: refused here, never asked.
TEST(KmodCore, MemoryMappedCallsOfAXenBefore13AreEopnotsuppWithoutAHypercall) {
    FakeXen xen;
    bp_env e = xen.env();
    e.xen_version = 0x00010002;
    EXPECT_EQ(bp_core_trap_span(&e, XEN_BUSPROF_start_trap_span, 0xfea00000, 0xfea00fff),
              -EOPNOTSUPP);
    bp_record_wide r{};
    EXPECT_EQ(bp_core_extract_mmio(&e, 0xfea00000, 0xfea00fff, &r, 1, nullptr), -EOPNOTSUPP);
    EXPECT_TRUE(xen.calls.empty());
}

TEST(KmodCore, BadSpansNeverReachTheHypervisor) {
    FakeXen xen;
    bp_env e = xen.env();
    e.xen_version = 0x00010003;
    EXPECT_EQ(bp_core_trap_span(&e, XEN_BUSPROF_start_trap_span, 0xfea00010, 0xfea00fff), -EINVAL);
    bp_record_wide r{};
    EXPECT_EQ(bp_core_extract_mmio(&e, 0xfea00fff, 0xfea00000, &r, 1, nullptr), -EINVAL);
    EXPECT_EQ(bp_core_extract_mmio(&e, 0xfea00000, 0xfea00fff, nullptr, 1, nullptr), -EINVAL);
    EXPECT_TRUE(xen.calls.empty());
}

TEST(KmodCore, ExtractMmioPagesWideRecordsThroughOneSnapshot) {
    FakeXen xen;
    bp_env e = xen.env();
    e.xen_version = 0x00010003;
    xen.total = XEN_BUSPROF_EXTRACT_MAX + 7;
    xen.script = {-EAGAIN};
    std::vector<bp_record_wide> r(xen.total + 3);
    size_t needed = 0;
    // any bounds: a register, not a whole page
    ASSERT_EQ(bp_core_extract_mmio(&e, 0xfea00004, 0xfea00007, r.data(), r.size(), &needed),
              static_cast<ssize_t>(xen.total));
    EXPECT_EQ(needed, xen.total);
    ASSERT_EQ(xen.calls.size(), 3u); // asked again once, then two pages
    for (const auto& c : xen.calls) {
        EXPECT_EQ(c.cmd, unsigned{XEN_BUSPROF_extract_wide});
        EXPECT_EQ(c.wide.span.first, 0xfea00004u);
        EXPECT_EQ(c.wide.span.last, 0xfea00007u);
        EXPECT_EQ(c.wide.span.space, unsigned{XEN_BUSPROF_SPACE_MMIO});
        EXPECT_EQ(c.wide.span.flags, 0u);
        EXPECT_EQ(c.wide.pad, 0u);
    }
    EXPECT_EQ(xen.calls[1].wide.snapshot, 0u);
    EXPECT_EQ(xen.calls[2].wide.offset, uint64_t{XEN_BUSPROF_EXTRACT_MAX});
    EXPECT_EQ(xen.calls[2].wide.snapshot, xen.snapshot);
    for (uint64_t i = 0; i < xen.total; i++) {
        ASSERT_EQ(r[i].rec.id, i + 1);
        ASSERT_EQ(r[i].addr, 0xfea00004 + 8 * i);
        ASSERT_EQ(r[i].value, 0x0123456789abcdefull + i);
        ASSERT_EQ(r[i].rec.size, 8);
        ASSERT_EQ(r[i].space, unsigned{BP_SPACE_MMIO});
    }
    EXPECT_EQ(r[xen.total].rec.id, 0u); // past the count: untouched
}

TEST(KmodCore, ExtractMmioSaysHowManyWhenTheBufferIsTooSmall) {
    FakeXen xen;
    bp_env e = xen.env();
    e.xen_version = 0x00010003;
    xen.total = 25;
    bp_record_wide r{};
    size_t needed = 0;
    EXPECT_EQ(bp_core_extract_mmio(&e, 0xfea00000, 0xfea00fff, &r, 1, &needed), -ENOBUFS);
    EXPECT_EQ(needed, 25u);
}

// The example module's accesses: out v, in v (scratch), in (line status).
struct Records {
    std::vector<kex_access> want;
    std::vector<bp_record> recs;
    static constexpr uint64_t lo = 0xffffffffc0a00000, hi = 0xffffffffc0a02000;

    explicit Records(unsigned int rounds) {
        uint64_t t = 1000;
        for (unsigned int i = 0; i < rounds; i++) {
            uint8_t v = static_cast<uint8_t>(i * 37 + 11);
            add(0x2ff, BP_DIR_OUT, 1, v, t);
            add(0x2ff, BP_DIR_IN, 1, v, t);
            add(0x2fd, BP_DIR_IN, 0, 0x60, t);
        }
    }
    void add(uint16_t port, uint8_t dir, uint8_t check, uint32_t value, uint64_t& t) {
        want.push_back(kex_access{port, dir, check, value});
        bp_record r{};
        r.id = recs.size() + 10;
        r.rip = lo + 0x40 + recs.size() % 3;
        r.t_trap_ns = t;
        r.t_bus_begin_ns = t + 10;
        r.t_bus_end_ns = t + 20;
        r.t_resume_ns = t + 30;
        t += 100;
        r.value = value;
        r.port = port;
        r.size = 1;
        r.dir = dir;
        recs.push_back(r);
    }
    int check(kex_result* res) const {
        return kex_check_records(recs.data(), recs.size(), want.data(), want.size(), lo, hi, res);
    }
};

TEST(KexampleCheck, TheAccessesMadePass) {
    Records r(100);
    kex_result res;
    ASSERT_EQ(r.check(&res), 0) << res.why;
    EXPECT_EQ(res.why, nullptr);
    EXPECT_EQ(res.rip_min, Records::lo + 0x40);
    EXPECT_EQ(res.rip_max, Records::lo + 0x42);
    EXPECT_EQ(res.skewed, 0u);
}

TEST(KexampleCheck, AMissingOrExtraRecordFails) {
    Records r(3);
    kex_result res;
    r.recs.pop_back();
    EXPECT_EQ(r.check(&res), -EBADMSG);
    EXPECT_STREQ(res.why, "another number of records than accesses made");
    Records extra(3);
    extra.recs.push_back(extra.recs.back());
    EXPECT_EQ(extra.check(&res), -EBADMSG);
}

TEST(KexampleCheck, AWrongValuePortDirectionOrStatusFails) {
    kex_result res;
    Records value(3);
    value.recs[4].value ^= 1; // the second read of the scratch register
    EXPECT_EQ(value.check(&res), -EBADMSG);
    EXPECT_EQ(res.bad, 4u);
    EXPECT_STREQ(res.why, "another value than the driver wrote or read");
    Records status_value(3);
    status_value.recs[2].value = 0xff; // line status: any value will do
    EXPECT_EQ(status_value.check(&res), 0);
    Records port(3);
    port.recs[1].port = 0x2fe;
    EXPECT_EQ(port.check(&res), -EBADMSG);
    Records dir(3);
    dir.recs[0].dir = BP_DIR_IN;
    EXPECT_EQ(dir.check(&res), -EBADMSG);
    Records status(3);
    status.recs[5].status = BP_STATUS_TIMEOUT;
    EXPECT_EQ(status.check(&res), -EBADMSG);
    EXPECT_EQ(res.bad, 5u);
    Records size(3);
    size.recs[0].size = 2;
    EXPECT_EQ(size.check(&res), -EBADMSG);
}

TEST(KexampleCheck, ARipOutsideTheDriversTextFails) {
    kex_result res;
    Records below(2);
    below.recs[3].rip = Records::lo - 1;
    EXPECT_EQ(below.check(&res), -EBADMSG);
    EXPECT_STREQ(res.why, "RIP outside the driver's text");
    Records at_end(2);
    at_end.recs[3].rip = Records::hi;
    EXPECT_EQ(at_end.check(&res), -EBADMSG);
}

TEST(KexampleCheck, IdsMustIncrease) {
    kex_result res;
    Records r(2);
    r.recs[2].id = r.recs[1].id;
    EXPECT_EQ(r.check(&res), -EBADMSG);
    EXPECT_STREQ(res.why, "ids not increasing");
}

TEST(KexampleCheck, StampsOutOfOrderMustBeFlaggedAndOnlyThen) {
    kex_result res;
    Records unflagged(2);
    unflagged.recs[1].t_trap_ns = unflagged.recs[1].t_bus_begin_ns + 1;
    EXPECT_EQ(unflagged.check(&res), -EBADMSG);
    EXPECT_STREQ(res.why, "stamps out of order and not flagged clock-skewed");
    Records flagged(2);
    flagged.recs[1].t_trap_ns = flagged.recs[1].t_bus_begin_ns + 1;
    flagged.recs[1].flags = BP_RECORD_CLOCK_SKEWED;
    EXPECT_EQ(flagged.check(&res), 0);
    EXPECT_EQ(res.skewed, 1u);
    Records flagged_in_order(2);
    flagged_in_order.recs[1].flags = BP_RECORD_CLOCK_SKEWED;
    EXPECT_EQ(flagged_in_order.check(&res), -EBADMSG);
    Records backwards_bus(2);
    backwards_bus.recs[1].t_bus_end_ns = backwards_bus.recs[1].t_bus_begin_ns - 1;
    backwards_bus.recs[1].flags = BP_RECORD_CLOCK_SKEWED;
    EXPECT_EQ(backwards_bus.check(&res), -EBADMSG);
}

} // namespace

// The example module's memory-mapped accesses on the edu device: the ID, a
// liveness pair, an 8-byte write and read.
struct WideRecords {
    std::vector<kex_mmio_access> want;
    std::vector<bp_record_wide> recs;
    static constexpr uint64_t lo = 0xffffffffc0a00000, hi = 0xffffffffc0a02000;
    static constexpr uint64_t bar = 0xfea00000;

    WideRecords() {
        uint64_t t = 1000;
        add(bar, BP_DIR_IN, 4, 0x010000ed, t);
        add(bar + 4, BP_DIR_OUT, 4, 0x5a5a0000, t);
        add(bar + 4, BP_DIR_IN, 4, 0xa5a5ffff, t);
        add(bar + 0x80, BP_DIR_OUT, 8, 0x0123456789abcdefull, t);
        add(bar + 0x80, BP_DIR_IN, 8, 0x0123456789abcdefull, t);
    }
    void add(uint64_t addr, uint8_t dir, uint8_t size, uint64_t value, uint64_t& t) {
        want.push_back(kex_mmio_access{addr, dir, size, 1, value});
        bp_record_wide r{};
        r.rec.id = recs.size() + 3;
        r.rec.rip = lo + 0x80;
        r.rec.t_trap_ns = t;
        r.rec.t_bus_begin_ns = t + 10;
        r.rec.t_bus_end_ns = t + 20;
        r.rec.t_resume_ns = t + 30;
        t += 100;
        r.rec.value = static_cast<uint32_t>(value);
        r.rec.size = size;
        r.rec.dir = dir;
        r.addr = addr;
        r.value = value;
        r.space = BP_SPACE_MMIO;
        recs.push_back(r);
    }
    int check(kex_result* res) const {
        return kex_check_wide(recs.data(), recs.size(), want.data(), want.size(), lo, hi, res);
    }
};

TEST(KexampleCheck, TheMemoryMappedAccessesMadePass) {
    WideRecords w;
    kex_result res;
    ASSERT_EQ(w.check(&res), 0) << res.why;
    EXPECT_EQ(res.rip_min, WideRecords::lo + 0x80);
    EXPECT_EQ(res.skewed, 0u);
}

TEST(KexampleCheck, AWrongAddressSizeValueOrSpaceFails) {
    const std::pair<const char*, void (*)(bp_record_wide&)> faults[] = {
        {"another address than the access made", [](bp_record_wide& r) { r.addr += 4; }},
        {"another size than the access made", [](bp_record_wide& r) { r.rec.size = 4; }},
        {"another value than the driver wrote or read",
         [](bp_record_wide& r) { r.value ^= 1ull << 40; }}, // only the high half differs
        {"not a memory-mapped access", [](bp_record_wide& r) { r.space = BP_SPACE_PIO; }},
        {"another direction than the access made",
         [](bp_record_wide& r) { r.rec.dir = BP_DIR_OUT; }},
        {"RIP outside the driver's text", [](bp_record_wide& r) { r.rec.rip = WideRecords::hi; }},
    };
    for (const auto& [why, fault] : faults) {
        WideRecords w;
        fault(w.recs[4]);
        kex_result res;
        EXPECT_EQ(w.check(&res), -EBADMSG) << why;
        EXPECT_EQ(res.bad, 4u) << why;
        EXPECT_STREQ(res.why, why);
    }
    WideRecords w;
    w.recs.pop_back();
    kex_result res;
    EXPECT_EQ(w.check(&res), -EBADMSG);
    EXPECT_STREQ(res.why, "another number of records than accesses made");
}

// The DIGEST line's digests: one per 1024 records, the last block short;
// each field the trace DB holds changes its block's digest and no other,
// the WHO flag alone (task and pcpu unset) changes none.
TEST(KexampleCheck, DigestsCoverEveryFieldOneBlockPer1024) {
    std::vector<bp_record> recs(2500);
    for (size_t i = 0; i < recs.size(); i++) {
        recs[i].id = 100 + i;
        recs[i].port = 0x2ff;
        recs[i].size = 1;
        recs[i].value = i & 0xff;
        recs[i].t_trap_ns = 1000 * i;
        recs[i].flags = BP_RECORD_WHO;
        recs[i].task = 0x1234000;
        recs[i].pcpu = 1;
    }
    uint64_t base[4] = {};
    ASSERT_EQ(kex_digests(recs.data(), recs.size(), base, 4), 3u);
    EXPECT_NE(base[0], base[1]);
    uint64_t two[2];
    EXPECT_EQ(kex_digests(recs.data(), recs.size(), two, 2), 2u); // at most max
    EXPECT_EQ(kex_digests(recs.data(), 0, two, 2), 0u);
    const std::pair<const char*, void (*)(bp_record&)> changes[] = {
        {"id", [](bp_record& r) { r.id++; }},
        {"vcpu", [](bp_record& r) { r.vcpu = 1; }},
        {"dir", [](bp_record& r) { r.dir = BP_DIR_IN; }},
        {"port", [](bp_record& r) { r.port = 0x2fe; }},
        {"size", [](bp_record& r) { r.size = 2; }},
        {"value", [](bp_record& r) { r.value ^= 1u << 31; }},
        {"rip", [](bp_record& r) { r.rip = 0x401000; }},
        {"t_trap_ns", [](bp_record& r) { r.t_trap_ns++; }},
        {"t_bus_begin_ns", [](bp_record& r) { r.t_bus_begin_ns = 1; }},
        {"t_bus_end_ns", [](bp_record& r) { r.t_bus_end_ns = 1; }},
        {"t_resume_ns", [](bp_record& r) { r.t_resume_ns = 1ull << 63; }},
        {"status", [](bp_record& r) { r.status = BP_STATUS_TIMEOUT; }},
        {"clock-skewed flag", [](bp_record& r) { r.flags |= BP_RECORD_CLOCK_SKEWED; }},
        {"task", [](bp_record& r) { r.task++; }},
        {"pcpu", [](bp_record& r) { r.pcpu = 0; }},
        {"no WHO flag", [](bp_record& r) { r.flags &= ~BP_RECORD_WHO; }},
    };
    for (const auto& [what, change] : changes) {
        auto copy = recs;
        change(copy[1500]);
        uint64_t d[3];
        ASSERT_EQ(kex_digests(copy.data(), copy.size(), d, 3), 3u);
        EXPECT_EQ(d[0], base[0]) << what;
        EXPECT_NE(d[1], base[1]) << what;
        EXPECT_EQ(d[2], base[2]) << what;
    }
    auto anon = recs;
    for (auto& r : anon) {
        r.flags &= ~BP_RECORD_WHO;
        r.task = 0;
        r.pcpu = 0;
    }
    for (auto& r : recs)
        r.task = r.pcpu = 0;
    uint64_t d[3];
    ASSERT_EQ(kex_digests(anon.data(), anon.size(), d, 3), 3u);
    uint64_t with_who[3];
    kex_digests(recs.data(), recs.size(), with_who, 3);
    EXPECT_EQ(d[0], with_who[0]); // WHO with task and pcpu 0 folds as no WHO
}
