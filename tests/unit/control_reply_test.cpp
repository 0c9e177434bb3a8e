// SPDX-License-Identifier: GPL-2.0-only
// The control socket's replies: what the daemon builds, the client reads
// back as it was meant.
#include "control_reply.h"

#include <gtest/gtest.h>

namespace busprof {
namespace {

using Kind = ControlReply::Kind;

TEST(ControlReply, AnOkReplyGivesItsLinesBack) {
    for (std::string body : {"", "session 3 is paused\n", "a\nb\n"}) {
        ControlReply r = parse_control_reply(control_ok(body));
        EXPECT_EQ(r.kind, Kind::ok) << body;
        EXPECT_EQ(r.body, body);
    }
    // A body without its line end gets one: "OK" stays a line of its own.
    EXPECT_EQ(control_ok("session 3 is paused"), "session 3 is paused\nOK\n");
}

TEST(ControlReply, AnErrorGivesItsMessageAndHintBack) {
    ControlReply r = parse_control_reply(control_err("cannot pause", "pause needs profiling"));
    EXPECT_EQ(r.kind, Kind::err);
    EXPECT_EQ(r.message, "cannot pause");
    EXPECT_EQ(r.hint, "pause needs profiling");
    EXPECT_EQ(control_err("cannot pause", "pause needs profiling"),
              "ERR cannot pause\nHINT pause needs profiling\n");

    r = parse_control_reply(control_err("the daemon did not answer within 2 s"));
    EXPECT_EQ(r.kind, Kind::err);
    EXPECT_EQ(r.message, "the daemon did not answer within 2 s");
    EXPECT_EQ(r.hint, "");
}

// A reply cut before its last line is no reply, whatever came before.
TEST(ControlReply, AReplyWithoutItsLastLineIsNone) {
    for (std::string cut : {"", "session 3 is paused\n", "session 3 is paused\nOK", "xOK\n"})
        EXPECT_EQ(parse_control_reply(cut).kind, Kind::none) << cut;
}

TEST(ControlReply, TheStatusLineReadsBackPairByPair) {
    const std::string line = status_line({{"session", "3"},
                                          {"domain", "guest"},
                                          {"state", "profiling"},
                                          {"queue", "0/65536"},
                                          {"db", "/var/lib/busprof/t.db"}});
    EXPECT_EQ(line,
              "session 3 domain guest state profiling queue 0/65536 db /var/lib/busprof/t.db\n");
    auto m = parse_status_line(line + "more\n");
    EXPECT_EQ(m.size(), 5u);
    EXPECT_EQ(m["session"], "3");
    EXPECT_EQ(m["queue"], "0/65536");
    EXPECT_EQ(m["db"], "/var/lib/busprof/t.db");
}

} // namespace
} // namespace busprof
