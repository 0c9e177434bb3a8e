/* SPDX-License-Identifier: GPL-2.0-only */
// The daemon's replies on its control socket, built (the daemon) and read
// (busprof status/pause/.../top) here only.  A reply is lines of text: on
// success what the command prints, then "OK"; on failure "ERR message" and
// perhaps "HINT how to fix it".  The status line is words in pairs,
// "session 3 domain g ... db PATH".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace busprof {

// body: the lines the client prints (each ending in '\n'), or none.
std::string control_ok(std::string_view body = {});
std::string control_err(std::string_view message, std::string_view hint = {});

struct ControlReply {
    enum class Kind {
        ok,
        err,
        none // no whole reply: the daemon went before its last line
    } kind = Kind::none;
    std::string body;          // ok: the lines before "OK"
    std::string message, hint; // err: without their keywords and line ends
};
ControlReply parse_control_reply(std::string_view reply);

// The status line from (key, value) pairs, and back (in order, or by key);
// a value has no blanks.
using StatusFields = std::vector<std::pair<std::string, std::string>>;
std::string status_line(const StatusFields& fields);
StatusFields parse_status_fields(std::string_view body);
std::map<std::string, std::string> parse_status_line(std::string_view body);

} // namespace busprof
