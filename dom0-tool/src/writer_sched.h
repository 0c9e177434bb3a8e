/* SPDX-License-Identifier: GPL-2.0-only */
// How the writer's threads are scheduled: their nice value, and a burst's
// commit at a real-time priority.
#pragma once

namespace busprof {

// Sets thread tid's nice value; false where that needs a privilege the
// process lacks, or the thread runs at a real-time priority (kept).
bool set_nice(int tid, int nice);

// How many times the scheduler took the CPU from the calling thread while
// it was runnable (a cut), since it started; 0 if unknown.
long own_cuts();
// Back to SCHED_OTHER, if a burst raised the calling thread.
void lower_from_burst();

} // namespace busprof
