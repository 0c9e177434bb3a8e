// SPDX-License-Identifier: GPL-2.0-only
// Fuzz target: how the daemon reads a control client (dom0-tool/src/control_server.cpp):
// the framing of the bytes into one request line, in whatever pieces recv() hands
// them over, and the parsing of that line into a command.
//
// Checked: the framer's answer depends only on the bytes, not on how they were
// cut; a line is everything before the first '\n' and never longer than kMaxLine;
// the parser throws nothing but UserError and accepts only a command word with
// blanks around it (and a trailing '\r').
#include "control_server.h"
#include "error.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using busprof::RequestFramer;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_control: %s\n", what);
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);
    // The first bytes say where recv() cuts; the rest is what the client sent.
    std::vector<size_t> cuts;
    for (int i = in.ConsumeIntegralInRange(0, 8); i > 0; i--)
        cuts.push_back(in.ConsumeIntegralInRange<size_t>(1, 300));
    std::string sent = in.ConsumeRemainingBytesAsString();

    RequestFramer f;
    RequestFramer::Result r = RequestFramer::Result::more;
    size_t off = 0, k = 0;
    while (off < sent.size()) {
        size_t n = k < cuts.size() ? cuts[k++] : sent.size() - off;
        n = std::min(n, sent.size() - off);
        r = f.feed(std::string_view(sent).substr(off, n));
        off += n;
    }

    // What the framer must have said, from the bytes as a whole.
    auto nl = sent.find('\n');
    std::string before = sent.substr(0, nl);
    RequestFramer::Result want = before.size() > RequestFramer::kMaxLine
                                     ? RequestFramer::Result::too_long
                                 : nl == std::string::npos ? RequestFramer::Result::more
                                                           : RequestFramer::Result::line;
    if (r != want)
        fail("the framer's answer depends on how the bytes were cut");
    if (r != RequestFramer::Result::line)
        return 0;
    if (f.line() != before)
        fail("the line is not what came before the first newline");

    try {
        auto cmd = busprof::parse_control_request(f.line());
        std::string word = f.line();
        if (!word.empty() && word.back() == '\r')
            word.pop_back();
        auto b = word.find_first_not_of(" \t"), e = word.find_last_not_of(" \t");
        if (b == std::string::npos || word.substr(b, e - b + 1) != busprof::to_string(cmd))
            fail("accepted a line that is not a command word");
    } catch (const busprof::UserError& e) {
        if (e.hint().empty())
            fail("an error without a hint");
    }
    return 0;
}
