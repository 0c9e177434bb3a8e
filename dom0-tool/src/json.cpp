// SPDX-License-Identifier: GPL-2.0-only
#include "json.h"

#include <cstdio>

namespace busprof {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one
// (overlong forms, surrogates and code points above U+10FFFF included).
size_t utf8_length(std::string_view s, size_t i) {
    auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    unsigned char c = b(0);
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || c > 0xf4 || i + n > s.size())
        return 0;
    for (size_t k = 1; k < n; k++)
        if ((b(k) & 0xc0) != 0x80)
            return 0;
    uint32_t cp = c & (0x7f >> n);
    for (size_t k = 1; k < n; k++)
        cp = cp << 6 | (b(k) & 0x3f);
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

} // namespace

std::string json_string(std::string_view v) {
    std::string o = "\"";
    for (size_t i = 0; i < v.size();) {
        unsigned char c = static_cast<unsigned char>(v[i]);
        if (c >= 0x80) {
            size_t n = utf8_length(v, i);
            if (n) {
                o.append(v.substr(i, n));
                i += n;
            } else {
                o += "\\ufffd";
                i++;
            }
            continue;
        }
        i++;
        switch (c) {
        case '"':
            o += "\\\"";
            break;
        case '\\':
            o += "\\\\";
            break;
        case '\b':
            o += "\\b";
            break;
        case '\f':
            o += "\\f";
            break;
        case '\n':
            o += "\\n";
            break;
        case '\r':
            o += "\\r";
            break;
        case '\t':
            o += "\\t";
            break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                o += buf;
            } else {
                o += static_cast<char>(c);
            }
        }
    }
    return o + "\"";
}

JsonObject& JsonObject::add_json(std::string_view key, std::string_view value) {
    if (text_.size() > 1)
        text_ += ", ";
    text_ += json_string(key);
    text_ += ": ";
    text_ += value;
    return *this;
}

JsonObject& JsonObject::add(std::string_view key, std::string_view text) {
    return add_json(key, json_string(text));
}

JsonObject& JsonObject::add(std::string_view key, int64_t v) {
    return add_json(key, std::to_string(v));
}

JsonObject& JsonObject::add(std::string_view key, uint64_t v) {
    return add_json(key, std::to_string(v));
}

JsonObject& JsonObject::add(std::string_view key, bool v) {
    return add_json(key, v ? "true" : "false");
}

JsonArray& JsonArray::add_json(std::string_view value) {
    if (text_.size() > 1)
        text_ += ", ";
    text_ += value;
    return *this;
}

} // namespace busprof
