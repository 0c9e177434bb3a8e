/* SPDX-License-Identifier: GPL-2.0-only */
// Where a command's output goes (-o PATH, or standard output): every write
// checked, and a file replaced only by a whole new one.  What PATH names
// decides how it is written:
//  - "-": standard output.
//  - a regular file, or nothing yet (a symlink is followed to its file):
//    a new file beside it, under a fresh name created with O_EXCL (nothing
//    planted there is followed), renamed over PATH by commit().  Until then
//    PATH keeps its old content; a command that fails leaves no trace.  A
//    file replaced keeps its permission bits.
//  - another file that opens for writing (a character device such as
//    /dev/null, a FIFO, a terminal, /proc/self/fd/N of a pipe): written in
//    place, never replaced.
//  - a directory, a dangling symlink, a socket: refused.
// A write that fails throws UserError naming PATH and the errno where it
// happens: a command stops at the first byte it could not write.
#pragma once

#include "fd.h"

#include <memory>
#include <ostream>
#include <string>

namespace busprof {

class Output {
  public:
    // Opens the destination; throws UserError.
    explicit Output(const std::string& path);
    ~Output(); // not committed: the new file goes, PATH is untouched
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;

    std::ostream& stream();
    bool is_stdout() const { return path_ == "-"; }
    // Writes what is buffered and checks that it arrived (flush, fsync,
    // close); a new file is then renamed into place.  Throws UserError.
    void commit();

  private:
    class Buf;
    std::string path_;   // as given
    std::string target_; // the file a new one replaces; empty: written in place
    std::string tmp_;    // the new file while it is written
    FD fd_;
    std::unique_ptr<Buf> buf_;
    std::unique_ptr<std::ostream> stream_;
};

// Flush C's stdout (printf, std::cout), and close it: throw UserError when
// anything written there was lost.  main closes it after every command.
void flush_stdout();
void close_stdout();

} // namespace busprof
