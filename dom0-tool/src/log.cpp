// SPDX-License-Identifier: GPL-2.0-only
#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace busprof {

namespace {
std::atomic<LogLevel> g_most{LogLevel::info};
} // namespace

void set_log_level(LogLevel most) {
    g_most.store(most, std::memory_order_relaxed);
}

bool log_enabled(LogLevel l) {
    return l <= g_most.load(std::memory_order_relaxed);
}

void log(LogLevel l, const char* fmt, ...) {
    if (!log_enabled(l))
        return;
    static constexpr const char* kPrefix[] = {
        "busprof: error: ", "busprof: warning: ", "busprof: ", "busprof: "};
    char line[2048];
    int n = std::snprintf(line, sizeof(line), "%s", kPrefix[static_cast<int>(l)]);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line + n, sizeof(line) - static_cast<size_t>(n), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "%s\n", line);
}

} // namespace busprof
