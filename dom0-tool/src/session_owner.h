/* SPDX-License-Identifier: GPL-2.0-only */
// Who owns a session row while it runs: "<boot id>/<pid>/<start time>" of
// its daemon, and whether that daemon still runs.
#pragma once

#include <string>

namespace busprof {

// This process, as sessions.owner names it.
std::string owner_self();
// Whether the process an owner names still runs (and is not a zombie).
bool owner_alive(const std::string& owner);

} // namespace busprof
