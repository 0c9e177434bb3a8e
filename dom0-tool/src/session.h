/* SPDX-License-Identifier: GPL-2.0-only */
// The session state machine of DESIGN.md:
//   configured -> profiling <-> paused -> stopped -> configured
// plus configured -> stopped.  Invalid transitions throw UserError and
// leave the state as it was.
#pragma once

#include "trigger.h"

#include <cstdint>
#include <optional>
#include <string>

namespace busprof {

enum class SessionState { configured, profiling, paused, stopped };

const char* to_string(SessionState s);

enum class SessionAction { start, pause, resume, stop, rearm };

const char* to_string(SessionAction a);

// The state after a, or nullopt if a is not allowed in s.
std::optional<SessionState> next_state(SessionState s, SessionAction a);

// What starts and stops recording.
struct Triggers {
    uint64_t start_after_accesses = 0;   // 0: on the guest's first start_trap
    bool manual_start = false;           // only 'busprof resume' starts it
    std::optional<AccessMatch> start_on; // at the first access that matches, recorded
    uint64_t pre_trigger = 0;            // keep the last N accesses before the start
    bool stop_on_stop_trap = false;      // when the last trapped range goes
    std::optional<AccessMatch> stop_on;  // after the first recorded access that matches
    uint64_t stop_after_records = 0;     // 0: no limit
    uint64_t duration_ns = 0;            // 0: no limit, counted from the start
    std::string start_text() const;
    std::string stop_text() const;
};

class Session {
  public:
    explicit Session(Triggers t) : triggers_(t) {}

    SessionState state() const { return state_; }
    const Triggers& triggers() const { return triggers_; }
    bool recording() const { return state_ == SessionState::profiling; }

    // A user command: throws UserError on an invalid transition.
    void apply(SessionAction a, uint64_t now);

    // Trigger inputs; each returns true when it changed the state.
    bool on_start_trap(uint64_t now);
    bool on_last_stop_trap(uint64_t now);
    bool on_access(const Record& r, uint64_t now);          // an access was served
    bool on_access_recorded(const Record& r, uint64_t now); // ... and will be recorded
    bool on_recorded(uint64_t now);                         // a record was queued
    bool on_tick(uint64_t now);

    uint64_t started_ns() const { return started_ns_; }
    uint64_t stopped_ns() const { return stopped_ns_; }

  private:
    bool go(SessionAction a, uint64_t now);

    Triggers triggers_;
    SessionState state_ = SessionState::configured;
    uint64_t accesses_ = 0, records_ = 0;
    uint64_t started_ns_ = 0, stopped_ns_ = 0;
};

} // namespace busprof
