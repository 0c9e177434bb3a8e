// SPDX-License-Identifier: GPL-2.0-only
// The session state machine and its triggers (dom0-tool/src/session.cpp).
#include "error.h"
#include "record.h"
#include "session.h"
#include "trigger.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace busprof {
namespace {

using S = SessionState;
using A = SessionAction;

const Record kAny{};

Record access(uint16_t port, uint8_t dir, uint32_t value, uint64_t rip = 0x401000,
              uint16_t vcpu = 0) {
    Record r{};
    r.port = port;
    r.dir = dir;
    r.value = value;
    r.rip = rip;
    r.vcpu = vcpu;
    r.size = 1;
    return r;
}

constexpr S kStates[] = {S::configured, S::profiling, S::paused, S::stopped};
constexpr A kActions[] = {A::start, A::pause, A::resume, A::stop, A::rearm};

// DESIGN.md: configured -> profiling <-> paused -> stopped -> configured,
// plus stop from any live state and resume as a manual start.
const std::map<std::pair<S, A>, S> kAllowed = {
    {{S::configured, A::start}, S::profiling}, {{S::configured, A::resume}, S::profiling},
    {{S::configured, A::stop}, S::stopped},    {{S::profiling, A::pause}, S::paused},
    {{S::profiling, A::stop}, S::stopped},     {{S::paused, A::resume}, S::profiling},
    {{S::paused, A::stop}, S::stopped},        {{S::stopped, A::rearm}, S::configured},
};

// Drives a fresh session into s through allowed transitions.
Session session_in(S s, Triggers t = {}) {
    Session x(t);
    switch (s) {
    case S::configured:
        break;
    case S::profiling:
        x.apply(A::start, 100);
        break;
    case S::paused:
        x.apply(A::start, 100);
        x.apply(A::pause, 200);
        break;
    case S::stopped:
        x.apply(A::start, 100);
        x.apply(A::stop, 300);
        break;
    }
    EXPECT_EQ(x.state(), s);
    return x;
}

TEST(SessionTransitions, NextStateMatchesTheDesignTable) {
    for (S s : kStates)
        for (A a : kActions) {
            auto it = kAllowed.find({s, a});
            auto n = next_state(s, a);
            if (it == kAllowed.end())
                EXPECT_FALSE(n.has_value()) << to_string(s) << " + " << to_string(a);
            else {
                ASSERT_TRUE(n.has_value()) << to_string(s) << " + " << to_string(a);
                EXPECT_EQ(*n, it->second) << to_string(s) << " + " << to_string(a);
            }
        }
}

TEST(SessionTransitions, ApplyFollowsEveryAllowedTransition) {
    for (auto& [from_action, to] : kAllowed) {
        Session x = session_in(from_action.first);
        x.apply(from_action.second, 1000);
        EXPECT_EQ(x.state(), to) << to_string(from_action.first) << " + "
                                 << to_string(from_action.second);
    }
}

TEST(SessionTransitions, InvalidTransitionThrowsUserErrorAndKeepsTheState) {
    int invalid = 0;
    for (S s : kStates)
        for (A a : kActions) {
            if (kAllowed.count({s, a}))
                continue;
            invalid++;
            Session x = session_in(s);
            uint64_t started = x.started_ns(), stopped = x.stopped_ns();
            EXPECT_THROW(x.apply(a, 5000), UserError) << to_string(s) << " + " << to_string(a);
            EXPECT_EQ(x.state(), s) << to_string(s) << " + " << to_string(a);
            EXPECT_EQ(x.started_ns(), started);
            EXPECT_EQ(x.stopped_ns(), stopped);
        }
    EXPECT_EQ(invalid, 12);
}

TEST(SessionTransitions, TheErrorNamesTheActionAndTheStateAndGivesAHint) {
    Session x = session_in(S::stopped);
    try {
        x.apply(A::pause, 1);
        FAIL() << "pause of a stopped session was accepted";
    } catch (const UserError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("pause"), std::string::npos) << what;
        EXPECT_NE(what.find("stopped"), std::string::npos) << what;
        EXPECT_NE(e.hint().find("profiling"), std::string::npos) << e.hint();
    }
}

TEST(SessionTransitions, AFullCycleCanBeRepeatedAfterRearm) {
    Session x{Triggers{}};
    for (int round = 0; round < 2; round++) {
        x.apply(A::start, 10);
        x.apply(A::pause, 20);
        x.apply(A::resume, 30);
        x.apply(A::stop, 40);
        EXPECT_EQ(x.state(), S::stopped);
        x.apply(A::rearm, 50);
        EXPECT_EQ(x.state(), S::configured);
    }
}

TEST(SessionTransitions, RecordingOnlyWhileProfiling) {
    for (S s : kStates)
        EXPECT_EQ(session_in(s).recording(), s == S::profiling) << to_string(s);
}

TEST(SessionTimes, StartTimeIsTheFirstStartAndSurvivesPause) {
    Session x{Triggers{}};
    EXPECT_EQ(x.started_ns(), 0u);
    x.apply(A::start, 1000);
    EXPECT_EQ(x.started_ns(), 1000u);
    x.apply(A::pause, 2000);
    x.apply(A::resume, 3000);
    EXPECT_EQ(x.started_ns(), 1000u);
    EXPECT_EQ(x.stopped_ns(), 0u);
    x.apply(A::stop, 4000);
    EXPECT_EQ(x.stopped_ns(), 4000u);
    EXPECT_EQ(x.started_ns(), 1000u);
}

TEST(SessionTimes, RearmClearsTheTimes) {
    Session x = session_in(S::stopped);
    ASSERT_NE(x.started_ns(), 0u);
    x.apply(A::rearm, 9000);
    EXPECT_EQ(x.started_ns(), 0u);
    EXPECT_EQ(x.stopped_ns(), 0u);
    x.apply(A::start, 9500);
    EXPECT_EQ(x.started_ns(), 9500u);
}

TEST(SessionNames, StatesAndActionsHaveDistinctNames) {
    EXPECT_STREQ(to_string(S::configured), "configured");
    EXPECT_STREQ(to_string(S::profiling), "profiling");
    EXPECT_STREQ(to_string(S::paused), "paused");
    EXPECT_STREQ(to_string(S::stopped), "stopped");
    EXPECT_STREQ(to_string(A::start), "start");
    EXPECT_STREQ(to_string(A::pause), "pause");
    EXPECT_STREQ(to_string(A::resume), "resume");
    EXPECT_STREQ(to_string(A::stop), "stop");
    EXPECT_STREQ(to_string(A::rearm), "rearm");
}

// ------------------------------------------------------------------ triggers

TEST(SessionTriggers, ByDefaultTheGuestsStartTrapStartsIt) {
    Session x{Triggers{}};
    EXPECT_TRUE(x.on_start_trap(100));
    EXPECT_EQ(x.state(), S::profiling);
    EXPECT_EQ(x.started_ns(), 100u);
    EXPECT_FALSE(x.on_start_trap(200)); // already running
    EXPECT_EQ(x.started_ns(), 100u);
}

TEST(SessionTriggers, StartTrapDoesNotRestartAPausedOrStoppedSession) {
    for (S s : {S::paused, S::stopped}) {
        Session x = session_in(s);
        EXPECT_FALSE(x.on_start_trap(1000)) << to_string(s);
        EXPECT_EQ(x.state(), s);
    }
}

TEST(SessionTriggers, ManualStartIgnoresStartTrapAndAccesses) {
    Triggers t;
    t.manual_start = true;
    t.start_after_accesses = 2;
    Session x(t);
    EXPECT_FALSE(x.on_start_trap(100));
    for (int i = 0; i < 5; i++)
        EXPECT_FALSE(x.on_access(kAny, 100 + i));
    EXPECT_EQ(x.state(), S::configured);
    x.apply(A::resume, 300);
    EXPECT_EQ(x.state(), S::profiling);
    EXPECT_EQ(x.started_ns(), 300u);
}

// The first N accesses go unrecorded: on_access of access N + 1 starts it
// (the daemon records an access when recording() holds after on_access).
TEST(SessionTriggers, StartAfterNAccessesStartsWithAccessNPlusOne) {
    Triggers t;
    t.start_after_accesses = 3;
    Session x(t);
    EXPECT_FALSE(x.on_start_trap(10)); // start_trap alone does not start it
    EXPECT_FALSE(x.on_access(kAny, 11));
    EXPECT_FALSE(x.on_access(kAny, 12));
    EXPECT_FALSE(x.on_access(kAny, 13));
    EXPECT_FALSE(x.recording());
    EXPECT_EQ(x.state(), S::configured);
    EXPECT_TRUE(x.on_access(kAny, 14));
    EXPECT_TRUE(x.recording());
    EXPECT_EQ(x.started_ns(), 14u);
    EXPECT_FALSE(x.on_access(kAny, 15));
}

TEST(SessionTriggers, RearmRestartsTheAccessCount) {
    Triggers t;
    t.start_after_accesses = 2;
    Session x(t);
    x.on_access(kAny, 1);
    x.on_access(kAny, 2);
    ASSERT_TRUE(x.on_access(kAny, 3));
    x.apply(A::stop, 3);
    x.apply(A::rearm, 4);
    EXPECT_FALSE(x.on_access(kAny, 5));
    EXPECT_FALSE(x.on_access(kAny, 6));
    EXPECT_TRUE(x.on_access(kAny, 7));
}

TEST(SessionTriggers, StopOnStopTrapStopsALiveSession) {
    Triggers t;
    t.stop_on_stop_trap = true;
    for (S s : {S::profiling, S::paused}) {
        Session x = session_in(s, t);
        EXPECT_TRUE(x.on_last_stop_trap(700)) << to_string(s);
        EXPECT_EQ(x.state(), S::stopped);
        EXPECT_EQ(x.stopped_ns(), 700u);
        EXPECT_FALSE(x.on_last_stop_trap(800));
        EXPECT_EQ(x.stopped_ns(), 700u);
    }
    // A session that never started is not stopped by a stop_trap.
    Session c(t);
    EXPECT_FALSE(c.on_last_stop_trap(900));
    EXPECT_EQ(c.state(), S::configured);
}

TEST(SessionTriggers, StopTrapDoesNothingWithoutTheTrigger) {
    Session x = session_in(S::profiling);
    EXPECT_FALSE(x.on_last_stop_trap(500));
    EXPECT_EQ(x.state(), S::profiling);
}

TEST(SessionTriggers, StopAfterNRecordsStopsOnTheNth) {
    Triggers t;
    t.stop_after_records = 3;
    Session x = session_in(S::profiling, t);
    EXPECT_FALSE(x.on_recorded(101));
    EXPECT_FALSE(x.on_recorded(102));
    EXPECT_EQ(x.state(), S::profiling);
    EXPECT_TRUE(x.on_recorded(103));
    EXPECT_EQ(x.state(), S::stopped);
    EXPECT_EQ(x.stopped_ns(), 103u);
    EXPECT_FALSE(x.on_recorded(104));
}

TEST(SessionTriggers, WithoutARecordLimitRecordsNeverStopIt) {
    Session x = session_in(S::profiling);
    for (int i = 0; i < 1000; i++)
        EXPECT_FALSE(x.on_recorded(200 + i));
    EXPECT_EQ(x.state(), S::profiling);
}

TEST(SessionTriggers, DurationStopsItOnceElapsedSinceTheStart) {
    Triggers t;
    t.duration_ns = 1000;
    Session x(t);
    EXPECT_FALSE(x.on_tick(5000)); // not started: nothing to time
    ASSERT_TRUE(x.on_start_trap(10000));
    EXPECT_FALSE(x.on_tick(10999));
    EXPECT_EQ(x.state(), S::profiling);
    EXPECT_TRUE(x.on_tick(11000));
    EXPECT_EQ(x.state(), S::stopped);
    EXPECT_EQ(x.stopped_ns(), 11000u);
    EXPECT_FALSE(x.on_tick(12000));
}

TEST(SessionTriggers, DurationCountsPausedTimeToo) {
    Triggers t;
    t.duration_ns = 1000;
    Session x(t);
    x.apply(A::start, 10000);
    x.apply(A::pause, 10100);
    EXPECT_TRUE(x.on_tick(11500));
    EXPECT_EQ(x.state(), S::stopped);
}

TEST(SessionTriggers, WithoutADurationTicksNeverStopIt) {
    Session x = session_in(S::profiling);
    EXPECT_FALSE(x.on_tick(~0ull));
    EXPECT_EQ(x.state(), S::profiling);
}

TEST(SessionTriggers, TextDescribesTheStartTrigger) {
    Triggers t;
    EXPECT_EQ(t.start_text(), "start_trap");
    t.start_after_accesses = 42;
    EXPECT_EQ(t.start_text(), "accesses:42");
    t.manual_start = true;
    EXPECT_EQ(t.start_text(), "manual");
}

TEST(SessionTriggers, TextDescribesTheStopTrigger) {
    Triggers t;
    EXPECT_EQ(t.stop_text(), "manual");
    t.stop_on_stop_trap = true;
    EXPECT_EQ(t.stop_text(), "stop_trap");
    t.duration_ns = 5000000;
    EXPECT_EQ(t.stop_text(), "duration:5000000,stop_trap");
    t.stop_after_records = 7;
    EXPECT_EQ(t.stop_text(), "records:7,duration:5000000,stop_trap");
    t = {};
    t.stop_after_records = 7;
    EXPECT_EQ(t.stop_text(), "records:7");
}

// ------------------------------------------------------ trigger conditions

TEST(AccessMatch, EachTermSelectsWhatItSays) {
    const uint8_t in = XEN_BUSPROF_DIR_IN, out = XEN_BUSPROF_DIR_OUT;
    struct Case {
        const char* cond;
        Record r;
        bool match;
    } cases[] = {
        {"port=0x3fd", access(0x3fd, in, 0), true},
        {"port=0x3fd", access(0x3fc, in, 0), false},
        {"port=0x3f8-0x3ff", access(0x3ff, out, 0), true},
        {"port=0x3f8-0x3ff", access(0x3f7, out, 0), false},
        {"dir=in", access(1, in, 0), true},
        {"dir=in", access(1, out, 0), false},
        {"value=0x20", access(1, in, 0x20), true},
        {"value=0x20", access(1, in, 0x21), false},
        {"value&0x20", access(1, in, 0x61), true},  // any bit of the mask
        {"value&0x60", access(1, in, 0x9f), false}, // none of them
        {"value&0x60=0x20", access(1, in, 0xbf), true},
        {"value&0x60=0x20", access(1, in, 0x60), false},
        {"rip=0x401000-0x401fff", access(1, in, 0, 0x401234), true},
        {"rip=0x401000-0x401fff", access(1, in, 0, 0x402000), false},
        {"rip=0xffffffff81000000", access(1, in, 0, 0xffffffff81000000ull), true},
        {"vcpu=1", access(1, in, 0, 0, 1), true},
        {"vcpu=1", access(1, in, 0, 0, 0), false},
        // every term must hold
        {"port=0x3fd,dir=in,value&0x20", access(0x3fd, in, 0x60), true},
        {"port=0x3fd,dir=in,value&0x20", access(0x3fd, out, 0x60), false},
        {"port=0x3fd,dir=in,value&0x20", access(0x3fd, in, 0x40), false},
        {"port=0x3fd,dir=in,value&0x20", access(0x3fe, in, 0x60), false},
    };
    for (auto& c : cases)
        EXPECT_EQ(parse_access_match(c.cond).matches(c.r), c.match) << c.cond;
    EXPECT_EQ(parse_access_match("port=0x3fd,dir=in").text, "port=0x3fd,dir=in");
}

TEST(AccessMatch, MalformedConditionsAreUserErrorsNamingTheTerm) {
    struct Case {
        const char* cond;
        const char* says;
    } cases[] = {
        {"", "empty trigger condition"},
        {"port=0x3fd,", "empty term"},
        {"port", "has no value"},
        {"port=", "malformed number"},
        {"port=0x10000", "too large"},
        {"port=0x3ff-0x3f8", "reversed range"},
        {"port= 0x3fd", "malformed number"},
        {"port=-1", "malformed number"},
        {"dir=both", "dir is in or out"},
        {"value", "has no value"},
        {"value&0", "mask of 0"},
        {"value&0x0f=0x20", "outside its mask"},
        {"value=0x100000000", "too large"},
        {"vcpu=32", "too large"},
        {"rip=0x2-0x1", "reversed range"},
        {"colour=red", "unknown trigger term"},
        {"port=1,port=2", "names port twice"},
        {"value=1,value&2", "names value&2 twice"},
    };
    for (auto& c : cases) {
        try {
            parse_access_match(c.cond);
            ADD_FAILURE() << c.cond << " was accepted";
        } catch (const UserError& e) {
            EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
                << c.cond << ": " << e.what();
            EXPECT_FALSE(e.hint().empty()) << c.cond;
        }
    }
}

TEST(SessionTriggers, StartOnStartsAtTheMatchingAccessWhichIsRecorded) {
    Triggers t;
    t.start_on = parse_access_match("port=0x3fd,dir=in,value&0x20");
    Session x(t);
    EXPECT_FALSE(x.on_start_trap(10)); // start_trap no longer starts it
    EXPECT_FALSE(x.on_access(access(0x3fd, XEN_BUSPROF_DIR_IN, 0x00), 20));
    EXPECT_FALSE(x.on_access(access(0x3fc, XEN_BUSPROF_DIR_IN, 0x20), 30));
    EXPECT_FALSE(x.recording());
    EXPECT_TRUE(x.on_access(access(0x3fd, XEN_BUSPROF_DIR_IN, 0x60), 40));
    EXPECT_TRUE(x.recording()); // so the daemon records the trigger access
    EXPECT_EQ(x.started_ns(), 40u);
    EXPECT_FALSE(x.on_access(access(0x3fd, XEN_BUSPROF_DIR_IN, 0x60), 50)); // once
    EXPECT_EQ(t.start_text(), "on:port=0x3fd,dir=in,value&0x20");
}

TEST(SessionTriggers, StopOnStopsAfterTheMatchingRecordedAccess) {
    Triggers t;
    t.stop_on = parse_access_match("port=0x3ff,value=0xee");
    t.stop_after_records = 100;
    Session x(t);
    Record hit = access(0x3ff, XEN_BUSPROF_DIR_OUT, 0xee);
    EXPECT_FALSE(x.on_access_recorded(hit, 5)); // not profiling yet: nothing to stop
    ASSERT_TRUE(x.on_start_trap(10));
    EXPECT_FALSE(x.on_access_recorded(access(0x3ff, XEN_BUSPROF_DIR_OUT, 0xef), 20));
    EXPECT_TRUE(x.on_access_recorded(hit, 30));
    EXPECT_EQ(x.state(), S::stopped);
    EXPECT_EQ(x.stopped_ns(), 30u);
    EXPECT_EQ(t.stop_text(), "records:100,on:port=0x3ff,value=0xee");
}

TEST(SessionTriggers, ManualStartWinsOverAMatch) {
    Triggers t;
    t.manual_start = true;
    t.start_on = parse_access_match("dir=in");
    Session x(t);
    EXPECT_FALSE(x.on_access(access(1, XEN_BUSPROF_DIR_IN, 0), 10));
    EXPECT_FALSE(x.recording());
}

} // namespace
} // namespace busprof
