// SPDX-License-Identifier: GPL-2.0-only
#include "session.h"

#include "error.h"
#include "record.h"

namespace busprof {

const char* to_string(SessionState s) {
    switch (s) {
    case SessionState::configured:
        return "configured";
    case SessionState::profiling:
        return "profiling";
    case SessionState::paused:
        return "paused";
    case SessionState::stopped:
        return "stopped";
    }
    return "?";
}

const char* to_string(SessionAction a) {
    switch (a) {
    case SessionAction::start:
        return "start";
    case SessionAction::pause:
        return "pause";
    case SessionAction::resume:
        return "resume";
    case SessionAction::stop:
        return "stop";
    case SessionAction::rearm:
        return "rearm";
    }
    return "?";
}

std::optional<SessionState> next_state(SessionState s, SessionAction a) {
    using S = SessionState;
    using A = SessionAction;
    switch (a) {
    case A::start:
        return s == S::configured ? std::optional(S::profiling) : std::nullopt;
    case A::pause:
        return s == S::profiling ? std::optional(S::paused) : std::nullopt;
    case A::resume:
        // resume also starts a session waiting for a manual start.
        return s == S::paused || s == S::configured ? std::optional(S::profiling) : std::nullopt;
    case A::stop:
        return s != S::stopped ? std::optional(S::stopped) : std::nullopt;
    case A::rearm:
        return s == S::stopped ? std::optional(S::configured) : std::nullopt;
    }
    return std::nullopt;
}

std::string Triggers::start_text() const {
    if (manual_start)
        return "manual";
    if (start_on)
        return "on:" + start_on->text;
    if (start_after_accesses)
        return "accesses:" + std::to_string(start_after_accesses);
    return "start_trap";
}

std::string Triggers::stop_text() const {
    std::string s;
    auto add = [&s](const std::string& t) { s += (s.empty() ? "" : ",") + t; };
    if (stop_after_records)
        add("records:" + std::to_string(stop_after_records));
    if (duration_ns)
        add("duration:" + std::to_string(duration_ns));
    if (stop_on_stop_trap)
        add("stop_trap");
    if (stop_on)
        add("on:" + stop_on->text);
    return s.empty() ? "manual" : s;
}

bool Session::go(SessionAction a, uint64_t now) {
    auto n = next_state(state_, a);
    if (!n)
        return false;
    if (*n == SessionState::profiling && !started_ns_)
        started_ns_ = now;
    if (*n == SessionState::stopped)
        stopped_ns_ = now;
    if (a == SessionAction::rearm) {
        accesses_ = records_ = 0;
        started_ns_ = stopped_ns_ = 0;
    }
    state_ = *n;
    return true;
}

void Session::apply(SessionAction a, uint64_t now) {
    static const char* needs[] = {"configured", "profiling", "paused or configured",
                                  "configured, profiling or paused", "stopped"};
    if (!go(a, now))
        throw UserError(
            std::string("cannot ") + to_string(a) + " a session that is " + to_string(state_),
            std::string(to_string(a)) + " needs a session that is " + needs[static_cast<int>(a)]);
}

bool Session::on_start_trap(uint64_t now) {
    if (state_ != SessionState::configured || triggers_.manual_start ||
        triggers_.start_after_accesses || triggers_.start_on)
        return false;
    return go(SessionAction::start, now);
}

bool Session::on_last_stop_trap(uint64_t now) {
    if (!triggers_.stop_on_stop_trap || state_ == SessionState::configured)
        return false;
    return go(SessionAction::stop, now);
}

// Called before the access is recorded or not: with start_after N, the
// first N accesses go unrecorded and access N + 1 is the first recorded.
// With start_on, the matching access is the first recorded: the trigger
// position is part of the trace.
bool Session::on_access(const Record& r, uint64_t now) {
    bool configured = state_ == SessionState::configured && !triggers_.manual_start;
    bool start = configured &&
                 ((triggers_.start_after_accesses && accesses_ >= triggers_.start_after_accesses) ||
                  (triggers_.start_on && triggers_.start_on->matches(r)));
    accesses_++;
    return start && go(SessionAction::start, now);
}

// With stop_on, the matching access is the last recorded.
bool Session::on_access_recorded(const Record& r, uint64_t now) {
    if (!triggers_.stop_on || state_ != SessionState::profiling || !triggers_.stop_on->matches(r))
        return false;
    return go(SessionAction::stop, now);
}

bool Session::on_recorded(uint64_t now) {
    records_++;
    if (triggers_.stop_after_records && records_ >= triggers_.stop_after_records)
        return go(SessionAction::stop, now);
    return false;
}

bool Session::on_tick(uint64_t now) {
    if (triggers_.duration_ns && started_ns_ && state_ != SessionState::stopped &&
        now - started_ns_ >= triggers_.duration_ns)
        return go(SessionAction::stop, now);
    return false;
}

} // namespace busprof
