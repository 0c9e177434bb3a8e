// SPDX-License-Identifier: GPL-2.0-only
#include "control_reply.h"

#include <sstream>

namespace busprof {

namespace {

constexpr std::string_view kOk = "OK\n", kErr = "ERR ", kHint = "\nHINT ";

std::string_view without_line_ends(std::string_view s) {
    while (!s.empty() && s.back() == '\n')
        s.remove_suffix(1);
    return s;
}

} // namespace

std::string control_ok(std::string_view body) {
    std::string r(body);
    if (!r.empty() && r.back() != '\n')
        r += '\n';
    return r.append(kOk);
}

std::string control_err(std::string_view message, std::string_view hint) {
    std::string r = std::string(kErr).append(message);
    if (!hint.empty())
        r.append(kHint).append(hint);
    return r + '\n';
}

ControlReply parse_control_reply(std::string_view reply) {
    ControlReply r;
    if (reply.starts_with(kErr)) {
        std::string_view msg = reply.substr(kErr.size()), hint;
        if (size_t h = msg.find(kHint); h != std::string_view::npos) {
            hint = msg.substr(h + kHint.size());
            msg = msg.substr(0, h);
        }
        r.kind = ControlReply::Kind::err;
        r.message = without_line_ends(msg);
        r.hint = without_line_ends(hint);
        return r;
    }
    // "OK" is a line of its own, the last.
    if (reply.ends_with(kOk) && (reply.size() == kOk.size() || reply[reply.size() - 4] == '\n')) {
        r.kind = ControlReply::Kind::ok;
        r.body = reply.substr(0, reply.size() - kOk.size());
    }
    return r;
}

std::string status_line(const StatusFields& fields) {
    std::string s;
    for (const auto& [k, v] : fields)
        s.append(s.empty() ? "" : " ").append(k).append(" ").append(v);
    return s + '\n';
}

StatusFields parse_status_fields(std::string_view body) {
    StatusFields f;
    std::istringstream in(std::string(body.substr(0, body.find('\n'))));
    std::string k, v;
    while (in >> k >> v)
        f.emplace_back(k, v);
    return f;
}

std::map<std::string, std::string> parse_status_line(std::string_view body) {
    std::map<std::string, std::string> m;
    for (auto& [k, v] : parse_status_fields(body))
        m[k] = v;
    return m;
}

} // namespace busprof
