# SPDX-License-Identifier: GPL-2.0-only
# busprof: the two entry points of the README.
#   make demo   install what is missing, build, run the demo on the simulated hypervisor
#   make test   install what is missing, build, run the test suite through ctest
#               (labels fast, package and system)
#   make test-sanitize  the fast suite built with ASan and UBSan (build-sanitize/)
# Other targets: build, deps, install, package, system-test, system-soak, asan, fuzz,
# fault-matrix, bench, format, clean.
#   make install [DESTDIR=DIR] [PREFIX=/usr/local]   what cmake --install installs
#   make package   the Debian packages of debian/ in $(BUILD)/deb (dpkg-buildpackage)
#   make system-test [ASAN=1] [BASELINE=1]   the real-Xen system test once
#   make system-soak N=10 [ASAN=1] [BASELINE=1]   ... N times, with a table of causes
#   make system-soak N=4 SERIES=FILE   Xen with only the patches FILE names, no busprof

BUILD ?= build
JOBS ?= $(shell nproc)
CTEST_LABELS ?= fast|package|system
DEPS = cmake g++ gcc make pkg-config python3 sqlite3 libsqlite3-dev libcli11-dev \
       libgtest-dev libgmock-dev libxen-dev xen-utils-common systemd pandoc mandoc libdw-dev tmux chromium dpkg-dev groff-base man-db file clang libclang-rt-14-dev clang-format \
       debhelper dh-dkms bash-completion lintian dkms linux-headers-amd64 \
       clickhouse-server clickhouse-client

PHONY_EXTRA = install package
.PHONY: demo test test-sanitize build deps asan $(PHONY_EXTRA) system-test system-soak fuzz fault-matrix bench format clean

N ?= 10
# ASAN=1: dom0's busprof from the AddressSanitizer+UBSan build ($(BUILD)/asan);
# BASELINE=1: the unpatched Xen without any busprof process (for comparison);
# SERIES=FILE: the same with Xen built from part of the patch series (bisecting).
SYSTEST_FLAGS = $(if $(filter 1,$(ASAN)),--asan) $(if $(filter 1,$(BASELINE)),--baseline) \
	$(if $(SERIES),--series $(abspath $(SERIES)))
# The system test installs the Debian packages (make package) in dom0.
SYSTEST_DEPS = build $(if $(filter 1,$(ASAN)),asan,package)

PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# dpkg-buildpackage in a copy of the tree (it writes into debian/ and the
# packages beside the tree): busprof, libbusprof0, libbusprof-dev,
# busprof-dkms and their -dbgsym in $(PKG_DIR).  A build of its own, without
# the tests: $(BUILD) is not used.
PKG_DIR ?= $(BUILD)/deb
package: deps
	rm -rf $(PKG_DIR) && mkdir -p $(PKG_DIR)/busprof
	tar -C . --exclude-vcs --exclude=./$(BUILD) --exclude=./$(SAN_BUILD) -cf - . | \
	    tar -C $(PKG_DIR)/busprof -xf -
	cd $(PKG_DIR)/busprof && \
	    DEB_BUILD_OPTIONS="parallel=$(JOBS) $(DEB_BUILD_OPTIONS)" dpkg-buildpackage -us -uc -b
	@ls $(PKG_DIR)/*.deb

demo: build
	$(BUILD)/dom0-tool/busprof demo --db busprof-demo.db

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L '$(CTEST_LABELS)'

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# ASan and LSan write every process's reports to SAN_LOGS, so a report from a
# child whose stderr a passing test never looks at still fails the run.  UBSan
# (GCC 12) ignores log_path: its reports go to stderr, and -fno-sanitize-recover
# aborts the process, which fails the test through its effects.
SAN_BUILD ?= build-sanitize
SAN_LOGS = $(abspath $(SAN_BUILD))/sanitizer-logs
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUSPROF_SANITIZE=ON >/dev/null
	cmake --build $(SAN_BUILD) -j$(JOBS)
	rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	cd $(SAN_BUILD) && \
	ASAN_OPTIONS=abort_on_error=1:log_path=$(SAN_LOGS)/report \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(SAN_LOGS)/report \
	ctest --output-on-failure -j$(JOBS) -L fast; rc=$$?; \
	if [ -n "$$(ls -A $(SAN_LOGS))" ]; then \
	    cat $(SAN_LOGS)/*; echo "test-sanitize: sanitizer reports in $(SAN_LOGS)"; exit 1; \
	fi; exit $$rc

# Installs the Debian packages that are missing (needs root; otherwise says which).
deps:
	@missing=""; for p in $(DEPS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ]; then \
	        echo "installing:$$missing"; \
	        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	    else \
	        echo "missing Debian packages:$$missing (run as root or: sudo apt-get install$$missing)"; exit 1; \
	    fi; \
	fi

# busprof (daemon and command) with AddressSanitizer and UBSan, the runtimes linked
# statically so that it runs in the system test's dom0.
asan: deps
	cmake -S . -B $(BUILD)/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
	    -DBUSPROF_SANITIZE=ON >/dev/null
	cmake --build $(BUILD)/asan -j$(JOBS) --target busprof

system-test: $(SYSTEST_DEPS)
	BUILD_ASAN=$(abspath $(BUILD))/asan tests/system/busprof/system-test.sh $(SYSTEST_FLAGS)

system-soak: $(SYSTEST_DEPS)
	BUILD_ASAN=$(abspath $(BUILD))/asan tests/system/soak.sh -n $(N) $(SYSTEST_FLAGS)

# The libFuzzer targets of tests/fuzz/ for FUZZ_SECONDS each (the fast suite
# runs them for 5 s); the corpus grows in $(BUILD)/fuzz/corpus/.
FUZZ_SECONDS ?= 60
fuzz: deps
	tests/fuzz/run.sh --build $(BUILD)/fuzz --seconds $(FUZZ_SECONDS)

# The fault suite's matrix at its full numbers (tests/fault/README.md), written to
# $(BUILD)/fault-matrix.md: 32 vCPUs for 120 s, 40 faults, hostile SQL and messages.
fault-matrix: build
	python3 tests/fault/load_test.py --bin $(BUILD) --full --out $(BUILD)/fault-matrix.md

# BENCH_FLAGS: busprof-bench's options, e.g. --rows 10000000 --rounds 3 --pin
BENCH_FLAGS ?=
# TRAP_FLAGS: tests/bench/trap_path.py's options (--pin, --vcpus 1,2,4, --rounds R,
# --queue N, --idle-hog with --pin).
bench: build
	$(BUILD)/tests/busprof-bench $(BENCH_FLAGS)
	python3 tests/bench/trap_path.py --bin $(BUILD) $(TRAP_FLAGS)

# The C++ of dom0-tool/ and tests/ (tests/format_check.sh checks it in make test).
format:
	clang-format -i $$(git ls-files 'dom0-tool/*.cpp' 'dom0-tool/*.h' 'tests/*.cpp' 'tests/*.h' | grep -v '/proto/')

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
