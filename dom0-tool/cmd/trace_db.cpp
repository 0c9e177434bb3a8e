// SPDX-License-Identifier: GPL-2.0-only
// The trace DB a reading command names with --db.
#include "cmd.h"
#include "db.h"
#include "error.h"

#include <sys/stat.h>

namespace busprof {

Db open_trace_db(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        throw UserError("trace DB " + path +
                            (S_ISDIR(st.st_mode) ? " is a directory" : " is not a regular file"),
                        "pass --db FILE, a trace DB that 'busprof daemon' or 'busprof demo' wrote");
    return Db::open(path, false);
}

} // namespace busprof
