/* SPDX-License-Identifier: GPL-2.0-only */
// Who owns a session row while it runs: "<boot id>/<pid>/<start time>" of
// its daemon, and whether that daemon still runs.
#pragma once

#include "db.h"

#include <string>

namespace busprof {

// This process, as sessions.owner names it.
std::string owner_self();
// Whether the process an owner names still runs (and is not a zombie).
bool owner_alive(const std::string& owner);
// Marks aborted the sessions of the DB at path whose daemon ended without
// stopping them (see session_owner.cpp).  Throws std::runtime_error.
void abort_orphans(Db& db, const std::string& path);

} // namespace busprof
