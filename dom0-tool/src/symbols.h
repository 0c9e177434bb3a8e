/* SPDX-License-Identifier: GPL-2.0-only */
// RIP -> function+offset (and source line where debug info has one), for
// the instruction addresses the trace stores.  Sources, each given as
// FILE or FILE@BIAS:
//  - an ELF file (executable, shared object, vmlinux), with or without
//    debug info, read with elfutils' libdwfl.  BIAS is where the file was
//    loaded in the guest (a PIE or a shared library); 0 for an ET_EXEC.
//  - a symbol table in System.map / /proc/kallsyms form ("ADDR TYPE NAME
//    [MODULE]" lines), which also names the guest kernel's modules; BIAS
//    is added to every address.
// The lookup is that of xenalyze's --symbol-file and of addr2line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace busprof {

struct SymbolAt {
    std::string name;         // function (or symbol) name; "[module]" appended for kallsyms
    uint64_t offset;          // from its start
    std::string source;       // "file:line" from debug info, empty if none
    std::string text() const; // "name+0xoff"
};

class Symbols {
  public:
    Symbols();
    ~Symbols();
    Symbols(Symbols&&) noexcept;
    Symbols& operator=(Symbols&&) noexcept;

    // Adds a source (see above).  Throws UserError for a file that cannot
    // be read or holds no symbols.
    void add(const std::string& spec);
    bool empty() const;

    // The symbol that covers addr, from the first source that knows it.
    std::optional<SymbolAt> lookup(uint64_t addr) const;

    // SQL functions on db, for as long as this object lives:
    //   symbol(rip) -> 'name+0xoff' or NULL,  source(rip) -> 'file:line' or NULL.
    void register_sql(sqlite3* db) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace busprof
