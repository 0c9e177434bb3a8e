/* SPDX-License-Identifier: GPL-2.0-only */
// busprof's one JSON writer: every command that prints JSON (query, stats,
// sessions, diff, status, policy, trap, report's data) builds it here.
// SQL that builds JSON with SQLite's json_object (export, report) is
// SQLite's writer, not a second one of busprof's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace busprof {

// v as a JSON string, quoted.  JSON must be valid UTF-8: a byte that is not
// part of a valid sequence becomes U+FFFD, as it would in any JSON library
// in its lenient mode.
std::string json_string(std::string_view v);

// One object, members in the order added: {"key": value, ...}, the form
// `busprof query --format json` prints its rows in.
class JsonObject {
  public:
    JsonObject& add(std::string_view key, std::string_view text);
    JsonObject& add(std::string_view key, const char* text) {
        return add(key, std::string_view(text));
    }
    JsonObject& add(std::string_view key, int64_t v);
    JsonObject& add(std::string_view key, uint64_t v);
    JsonObject& add(std::string_view key, int v) { return add(key, static_cast<int64_t>(v)); }
    JsonObject& add(std::string_view key, unsigned v) { return add(key, static_cast<uint64_t>(v)); }
    JsonObject& add(std::string_view key, bool v);
    // value is JSON already: a number as text, an array, an object, null.
    JsonObject& add_json(std::string_view key, std::string_view value);
    std::string str() const { return text_ + "}"; }

  private:
    std::string text_ = "{";
};

// Elements (JSON each) as an array: [a, b, ...].
class JsonArray {
  public:
    JsonArray& add_json(std::string_view value);
    std::string str() const { return text_ + "]"; }

  private:
    std::string text_ = "[";
};

} // namespace busprof
