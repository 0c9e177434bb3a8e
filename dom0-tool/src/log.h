/* SPDX-License-Identifier: GPL-2.0-only */
// What the daemon has to say while it runs, on stderr, by level.  A
// command's own failure is not logged: it is a UserError that main prints
// ("busprof: error:" and a HINT) before exiting 1.
#pragma once

namespace busprof {

// error: something was lost or the run failed; warning: the daemon runs,
// less well than asked; info: what it is doing (on by default); debug:
// libxen's own chatter.
enum class LogLevel { error, warning, info, debug };

// The most detailed level printed (info unless set; --quiet: error, -v:
// debug).  Any thread.
void set_log_level(LogLevel most);
bool log_enabled(LogLevel l);

// One line: "busprof: error: ...", "busprof: warning: ...", "busprof: ..."
// (info, debug), written with one call so that lines of threads that log
// at once do not interleave.
[[gnu::format(printf, 2, 3)]] void log(LogLevel l, const char* fmt, ...);

} // namespace busprof
