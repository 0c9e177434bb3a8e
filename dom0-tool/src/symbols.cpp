// SPDX-License-Identifier: GPL-2.0-only
#include "symbols.h"

#include "error.h"
#include "fd.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

namespace busprof {

std::string SymbolAt::text() const {
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%" PRIx64, offset);
    return name + off;
}

namespace {

// A C++ name as written in the source; anything else as it is.
std::string demangle(const char* name) {
    if (std::strncmp(name, "_Z", 2) != 0)
        return name;
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string s = status == 0 && d ? d : name;
    std::free(d);
    return s;
}

// Hexadecimal, with or without 0x, as System.map and @ADDR write it.
std::optional<uint64_t> parse_hex(std::string s) {
    if (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0)
        s = s.substr(2);
    if (s.empty() || s.size() > 16 || s.find_first_not_of("0123456789abcdefABCDEF") != s.npos)
        return std::nullopt;
    return std::strtoull(s.c_str(), nullptr, 16);
}

const char* const kSymbolsHint = "--symbols takes an ELF file or a System.map/kallsyms dump";

// A --symbols file, opened once and only if it is a regular file: a FIFO
// would block, a device such as /dev/zero never end.
FD open_symbols(const std::string& path) {
    FD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    struct stat st;
    if (!fd || ::fstat(fd.get(), &st) != 0)
        throw UserError("cannot open " + path + ": " + std::strerror(errno), kSymbolsHint);
    if (!S_ISREG(st.st_mode))
        throw UserError(path + " is not a regular file", kSymbolsHint);
    return fd;
}

// One source of symbols.
class Source {
  public:
    virtual ~Source() = default;
    virtual std::optional<SymbolAt> lookup(uint64_t addr) const = 0;
};

// An ELF file through libdwfl: symbol tables, and DWARF lines when present.
class ElfSource : public Source {
  public:
    ElfSource(const FD& file, const std::string& path, uint64_t bias) {
        static const Dwfl_Callbacks offline = {
            dwfl_build_id_find_elf,
            dwfl_standard_find_debuginfo,
            dwfl_offline_section_address,
            nullptr,
        };
        dwfl_ = dwfl_begin(&offline);
        if (!dwfl_)
            throw UserError(std::string("cannot read symbols: ") + dwfl_errmsg(-1),
                            "elfutils' libdw could not start; check its installation");
        dwfl_report_begin(dwfl_);
        std::string name = path.substr(path.find_last_of('/') + 1);
        // Loaded at bias: the first PT_LOAD's address is added to it, so a
        // PIE takes its load address and an ET_EXEC 0.
        // libdwfl owns the descriptor once it took the file.
        int fd = ::fcntl(file.get(), F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            throw_errno("dup");
        mod_ = dwfl_report_elf(dwfl_, name.c_str(), path.c_str(), fd, bias, true);
        if (!mod_) {
            std::string err = dwfl_errmsg(-1);
            ::close(fd);
            dwfl_end(dwfl_);
            throw UserError("cannot read symbols from " + path + ": " + err,
                            "give an ELF file with a symbol table, or a System.map");
        }
        dwfl_report_end(dwfl_, nullptr, nullptr);
        if (dwfl_module_getsymtab(mod_) <= 0) {
            dwfl_end(dwfl_);
            throw UserError(path + " has no symbol table",
                            "give the unstripped file, or its debug file");
        }
    }
    ~ElfSource() override { dwfl_end(dwfl_); }
    ElfSource(const ElfSource&) = delete;
    ElfSource& operator=(const ElfSource&) = delete;

    std::optional<SymbolAt> lookup(uint64_t addr) const override {
        Dwfl_Module* m = dwfl_addrmodule(dwfl_, addr);
        if (!m)
            return std::nullopt;
        GElf_Off off = 0;
        GElf_Sym sym;
        const char* name = dwfl_module_addrinfo(m, addr, &off, &sym, nullptr, nullptr, nullptr);
        if (!name)
            return std::nullopt;
        SymbolAt s{demangle(name), off, {}};
        if (Dwfl_Line* l = dwfl_module_getsrc(m, addr)) {
            int line = 0;
            if (const char* file = dwfl_lineinfo(l, nullptr, &line, nullptr, nullptr, nullptr))
                s.source = std::string(file) + ":" + std::to_string(line);
        }
        // inb()/outb() are inlined: the line a driver writer wants is where
        // the function itself called them.
        if (std::string site = call_site(m, addr); !site.empty())
            s.source = site + (s.source.empty() ? "" : " (inlined " + s.source + ")");
        return s;
    }

  private:
    // The call site of the innermost inlined function that addr lies in:
    // for outb() in a driver's function, the driver's line, even where that
    // function was inlined into its own caller in turn (dwarf_getscopes()
    // goes on from an inlined instance to the scopes of its definition, not
    // to where it was inlined).  Empty if addr lies in none.
    static std::string call_site(Dwfl_Module* m, uint64_t addr) {
        Dwarf_Addr bias = 0;
        Dwarf_Die* cu = dwfl_module_addrdie(m, addr, &bias);
        if (!cu)
            return {};
        Dwarf_Die* scopes = nullptr;
        int n = dwarf_getscopes(cu, addr - bias, &scopes);
        std::string site;
        for (int i = 0; i < n; i++) {
            if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
                continue;
            Dwarf_Attribute fa, la;
            Dwarf_Word file = 0, line = 0;
            Dwarf_Files* files = nullptr;
            size_t nfiles = 0;
            if (!dwarf_attr(&scopes[i], DW_AT_call_file, &fa) ||
                !dwarf_attr(&scopes[i], DW_AT_call_line, &la) || dwarf_formudata(&fa, &file) ||
                dwarf_formudata(&la, &line) || dwarf_getsrcfiles(cu, &files, &nfiles) ||
                file >= nfiles)
                continue;
            if (const char* f = dwarf_filesrc(files, file, nullptr, nullptr)) {
                site = std::string(f) + ":" + std::to_string(line);
                break;
            }
        }
        std::free(scopes);
        return site;
    }

  public:
  private:
    Dwfl* dwfl_ = nullptr;
    Dwfl_Module* mod_ = nullptr;
};

// A System.map or /proc/kallsyms dump: text symbols, no sizes.  An address
// belongs to the nearest symbol below it, up to the next symbol; past the
// last one only within kLastReach bytes.  An error never quotes the file:
// it may be one the user did not mean to show (--symbols /etc/shadow).
class MapSource : public Source {
  public:
    static constexpr uint64_t kLastReach = 64 * 1024;
    // A kernel's System.map with every module is a few MiB.
    static constexpr size_t kMaxBytes = size_t{64} << 20;

    MapSource(const FD& file, const std::string& path, uint64_t bias) {
        std::istringstream in(read_bounded(file, path));
        std::string line;
        unsigned n = 0;
        bool any_nonzero = false;
        while (std::getline(in, line)) {
            n++;
            if (!line.empty() && line.back() == '\r')
                line.pop_back();
            if (line.find_first_not_of(" \t") == std::string::npos)
                continue;
            char addr[32], type[8], name[512], module[256] = "";
            int k = std::sscanf(line.c_str(), "%31s %7s %511s %255s", addr, type, name, module);
            std::string where = path + " line " + std::to_string(n);
            auto a = parse_hex(addr);
            if (k < 3 || std::strlen(type) != 1 || !a)
                throw UserError("cannot read " + where + ": not 'ADDRESS TYPE NAME [MODULE]'",
                                "a symbol table has lines 'ADDRESS TYPE NAME [MODULE]' with a "
                                "hexadecimal ADDRESS, as System.map and /proc/kallsyms do");
            any_nonzero |= *a != 0;
            if (!std::strchr("tTwW", type[0]))
                continue; // only code can hold an instruction
            std::string nm = demangle(name);
            if (k == 4)
                nm += std::string(" ") + module;
            syms_.push_back({*a + bias, std::move(nm)});
        }
        if (n && !any_nonzero)
            throw UserError(path + " has every address 0",
                            "/proc/kallsyms hides addresses from unprivileged readers; copy it "
                            "as root in the guest");
        if (syms_.empty())
            throw UserError(path + " holds no text symbols",
                            "give a System.map, a /proc/kallsyms dump or an ELF file");
        std::stable_sort(syms_.begin(), syms_.end(),
                         [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
    }

    std::optional<SymbolAt> lookup(uint64_t addr) const override {
        auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                                   [](uint64_t a, const Sym& s) { return a < s.addr; });
        if (it == syms_.begin())
            return std::nullopt;
        const Sym& s = *std::prev(it);
        if (it == syms_.end() && addr - s.addr >= kLastReach)
            return std::nullopt;
        return SymbolAt{s.name, addr - s.addr, {}};
    }

  private:
    struct Sym {
        uint64_t addr;
        std::string name;
    };
    std::vector<Sym> syms_;

    static std::string read_bounded(const FD& file, const std::string& path) {
        std::string text;
        char buf[64 * 1024];
        for (;;) {
            ssize_t k = ::read(file.get(), buf, sizeof(buf));
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                throw UserError("cannot read " + path + ": " + std::strerror(errno), kSymbolsHint);
            if (k == 0)
                return text;
            if (text.size() + static_cast<size_t>(k) > kMaxBytes)
                throw UserError(path + " is larger than " + std::to_string(kMaxBytes >> 20) +
                                    " MiB and no ELF file",
                                kSymbolsHint);
            text.append(buf, static_cast<size_t>(k));
        }
    }
};

bool is_elf(const FD& file) {
    char magic[4] = {};
    return ::pread(file.get(), magic, 4, 0) == 4 && std::memcmp(magic,
                                                                "\x7f"
                                                                "ELF",
                                                                4) == 0;
}

} // namespace

struct Symbols::Impl {
    std::vector<std::unique_ptr<Source>> sources;
};

Symbols::Symbols() : impl_(std::make_unique<Impl>()) {}
Symbols::~Symbols() = default;
Symbols::Symbols(Symbols&&) noexcept = default;
Symbols& Symbols::operator=(Symbols&&) noexcept = default;

void Symbols::add(const std::string& spec) {
    std::string path = spec;
    uint64_t bias = 0;
    if (auto at = spec.rfind('@'); at != std::string::npos) {
        path = spec.substr(0, at);
        std::string b = spec.substr(at + 1);
        auto v = parse_hex(b);
        if (!v)
            throw UserError("bad address '" + b + "' in --symbols " + spec,
                            "addresses are hexadecimal");
        bias = *v;
    }
    if (path.empty())
        throw UserError("--symbols needs a file", "--symbols FILE or --symbols FILE@LOAD_ADDRESS");
    FD file = open_symbols(path);
    if (is_elf(file))
        impl_->sources.push_back(std::make_unique<ElfSource>(file, path, bias));
    else
        impl_->sources.push_back(std::make_unique<MapSource>(file, path, bias));
}

bool Symbols::empty() const {
    return impl_->sources.empty();
}

std::optional<SymbolAt> Symbols::lookup(uint64_t addr) const {
    for (auto& s : impl_->sources)
        if (auto r = s->lookup(addr))
            return r;
    return std::nullopt;
}

namespace {

void sql_symbol(sqlite3_context* ctx, int, sqlite3_value** argv, bool source) {
    if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER) {
        sqlite3_result_null(ctx);
        return;
    }
    auto* syms = static_cast<const Symbols*>(sqlite3_user_data(ctx));
    // RIPs are stored as INTEGER: those above 2^63 read back negative.
    auto rip = static_cast<uint64_t>(sqlite3_value_int64(argv[0]));
    auto s = syms->lookup(rip);
    std::string text = !s ? std::string() : source ? s->source : s->text();
    if (text.empty())
        sqlite3_result_null(ctx);
    else
        sqlite3_result_text(ctx, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

} // namespace

void Symbols::register_sql(sqlite3* db) const {
    const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
    auto* self = const_cast<Symbols*>(this);
    int rc = sqlite3_create_function_v2(
        db, "symbol", 1, flags, self,
        [](sqlite3_context* c, int n, sqlite3_value** v) { sql_symbol(c, n, v, false); }, nullptr,
        nullptr, nullptr);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function_v2(
            db, "source", 1, flags, self,
            [](sqlite3_context* c, int n, sqlite3_value** v) { sql_symbol(c, n, v, true); },
            nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK)
        throw SystemError(std::string("registering symbol() with SQLite: ") + sqlite3_errmsg(db),
                          EINVAL);
}

} // namespace busprof
