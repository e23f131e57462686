# mdc: the two commands. `make run` and `make test` do all set-up on a fresh Debian 12 machine.
BUILD        ?= build
BUILD_ASAN   ?= build-asan
BUILD_TSAN   ?= build-tsan
BUILD_BENCH  ?= build-bench
BUILD_FUZZ   ?= build-fuzz
BUILD_LIBFUZZER ?= build-libfuzzer
JOBS         ?= $(shell nproc)
CMAKE_FLAGS  ?=
CTEST_FLAGS  ?= --output-on-failure -j $(JOBS)
# Quiet steps (scripts/quiet.sh): a build's output goes to <dir>/build.log and a ctest run's to
# <dir>/ctest.log; the terminal gets one progress line per step, the summaries, and on a failure
# the log's errors and last lines (every failed test's output) and its path. V=1: everything.
V            ?=
ifeq ($(V),1)
quiet        =
else
quiet        = scripts/quiet.sh $(1) "$(2)" $(3) --
endif
# A comma inside $(call ...) arguments: written $(comma), or it splits the argument.
comma := ,

.PHONY: all deps build run test test-main test-asan test-tsan build-bench test-browser bench fuzz-build soak clean

all: build

deps:
	@scripts/deps.sh

# configure(dir, extra flags): (re)configures when the folder is new or its flags changed since
# the last configure (kept in <dir>/.mdc-flags); --fresh, so a flag taken away is gone too.
define configure
	@flags='-DMD_WERROR=ON $(CMAKE_FLAGS) $(2)'; \
	if [ ! -f $(1)/CMakeCache.txt ] || [ "$$(cat $(1)/.mdc-flags 2>/dev/null)" != "$$flags" ]; then \
	  echo "configure $(1): $$flags"; \
	  cmake --fresh -S . -B $(1) $$flags >/dev/null && echo "$$flags" > $(1)/.mdc-flags; \
	fi
endef

build: deps
	$(call configure,$(BUILD),)
	@$(call quiet,build,build $(BUILD)/,$(BUILD)/build.log) cmake --build $(BUILD) -j $(JOBS)

# The main job: replay the conformance corpus on the simulator, log every result to
# results/mdc.db, print the summary, then write the run's report to results/report/ (page,
# PR summary, JUnit) and print the path of its index.html. The exit status is replay's (non-zero
# on anything unexpected), or the report's when that fails.
RESULTS_DB   ?= results/mdc.db
REPORT_DIR   ?= results/report
MDC          = $(BUILD)/conformance/mdc/mdc
run: build
	@rc=0; \
	export MDC_REVISION="$${MDC_REVISION:-$$(git describe --always --dirty 2>/dev/null || echo unknown)}"; \
	$(MDC) replay --config backend=sim --db $(RESULTS_DB) conformance/traces || rc=$$?; \
	if [ $$rc -le 1 ]; then $(MDC) report --db $(RESULTS_DB) --out $(REPORT_DIR) || rc=$$?; fi; \
	exit $$rc

test: test-main test-asan test-tsan build-bench
	@echo "make test: all suites passed"

# clang, its runtimes (libFuzzer, the sanitizers: libclang-rt-14-dev, which clang does not pull in)
# and zip: the oss_fuzz_build tests build .clusterfuzzlite/build.sh's fuzzers (libFuzzer
# with ASan, with UBSan) instead of skipping; about 23 MB to download, and 2-3 minutes a test.
test-main: build
	@scripts/deps.sh clang libclang-rt-14-dev zip unzip
	@$(call quiet,ctest,ctest $(BUILD)/,$(BUILD)/ctest.log) ctest --test-dir $(BUILD) $(CTEST_FLAGS)

test-asan: deps
	$(call configure,$(BUILD_ASAN),-DCMAKE_BUILD_TYPE=Debug -DMD_SANITIZE=address$(comma)undefined -DMD_BUILD_BENCH=OFF)
	@$(call quiet,build,build $(BUILD_ASAN)/,$(BUILD_ASAN)/build.log) cmake --build $(BUILD_ASAN) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(call quiet,ctest,ctest $(BUILD_ASAN)/ (ASan+UBSan),$(BUILD_ASAN)/ctest.log) ctest --test-dir $(BUILD_ASAN) $(CTEST_FLAGS)

test-tsan: deps
	$(call configure,$(BUILD_TSAN),-DCMAKE_BUILD_TYPE=Debug -DMD_SANITIZE=thread -DMD_BUILD_BENCH=OFF)
	@$(call quiet,build,build $(BUILD_TSAN)/,$(BUILD_TSAN)/build.log) cmake --build $(BUILD_TSAN) -j $(JOBS)
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(call quiet,ctest,ctest $(BUILD_TSAN)/ (TSan; concurrency),$(BUILD_TSAN)/ctest.log) ctest --test-dir $(BUILD_TSAN) $(CTEST_FLAGS) -L concurrency

# Opt-in (installs Debian's chromium): a report opened in headless Chromium, its first screen
# checked (not blank, run header and totals on it); screenshots in results/browser/.
test-browser:
	BUILD=$(BUILD) JOBS=$(JOBS) scripts/test_browser.sh

# The benchmark configuration (Release, -Werror) is built by `make test` too, so it cannot rot.
build-bench: deps
	$(call configure,$(BUILD_BENCH),-DCMAKE_BUILD_TYPE=Release -DMD_BUILD_TESTS=OFF)
	@$(call quiet,build,build $(BUILD_BENCH)/ (Release),$(BUILD_BENCH)/build.log) cmake --build $(BUILD_BENCH) -j $(JOBS)

bench: build-bench
	$(BUILD_BENCH)/bench/md_bench

# The long soak (docs/testing.md, "The soak"): md_soak under ASan+UBSan (a use-after-free or a
# leak is what a soak finds, and a plain build survives one silently) for SOAK_SECONDS of racing
# threads with a new seed each run (printed, and in every failure line), then 1,000 open/close
# cycles. Not part of `make test`, whose short runs have fixed seeds.
SOAK_SECONDS ?= 300
SOAK_SEED    ?= $(shell date +%s)
SOAK_ARGS    ?=
soak: deps
	$(call configure,$(BUILD_ASAN),-DCMAKE_BUILD_TYPE=Debug -DMD_SANITIZE=address$(comma)undefined -DMD_BUILD_BENCH=OFF)
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target md_soak
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(BUILD_ASAN)/runtime/tests/stress/md_soak --seconds $(SOAK_SECONDS) --seed $(SOAK_SEED) \
	  --threads 8 --clients 2 --cycles 1000 $(SOAK_ARGS)

# The fuzz targets (docs/fuzzing.md), after the main build (mdc, md_fuzz_replay and the seeds live
# there): AFL++ persistent shared-memory mode with UBSan ($(BUILD_FUZZ): the main instance), the
# same with ASan+UBSan ($(BUILD_FUZZ)-asan: a secondary, and triage), the CMPLOG build a secondary
# uses ($(BUILD_FUZZ)-cmplog), and libFuzzer with ASan+UBSan ($(BUILD_LIBFUZZER)). Each also builds
# the mutants driver, instrumented. Installs afl++ and clang with apt when they are missing.
# clang links the sanitizer runtimes into executables only: the driver .so the libFuzzer targets
# load takes them from the executable (-z undefs after the driver's own --no-undefined).
FUZZ_FLAGS = -DMD_BUILD_FUZZ=ON -DMD_BUILD_TESTS=OFF -DMD_BUILD_BENCH=OFF -DMD_HIP=off
# Harness functions afl-clang-fast does not instrument (see the file).
export AFL_LLVM_DENYLIST = $(CURDIR)/fuzz/afl-denylist.txt
fuzz-build: build
	@scripts/deps.sh afl++ clang
	$(call configure,$(BUILD_FUZZ),-DCMAKE_C_COMPILER=afl-clang-fast $(FUZZ_FLAGS) -DMD_SANITIZE=undefined)
	AFL_QUIET=1 cmake --build $(BUILD_FUZZ) -j $(JOBS) --target md_fuzz_targets
	$(call configure,$(BUILD_FUZZ)-asan,-DCMAKE_C_COMPILER=afl-clang-fast $(FUZZ_FLAGS) -DMD_SANITIZE=address$(comma)undefined)
	AFL_QUIET=1 cmake --build $(BUILD_FUZZ)-asan -j $(JOBS) --target md_fuzz_targets
	$(call configure,$(BUILD_FUZZ)-cmplog,-DCMAKE_C_COMPILER=afl-clang-fast $(FUZZ_FLAGS) -DMDC_FUZZ_FLAVOR=afl-cmplog)
	AFL_QUIET=1 AFL_LLVM_CMPLOG=1 cmake --build $(BUILD_FUZZ)-cmplog -j $(JOBS) --target md_fuzz_targets
	$(call configure,$(BUILD_LIBFUZZER),-DCMAKE_C_COMPILER=clang $(FUZZ_FLAGS) -DMD_SANITIZE=address$(comma)undefined -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_C_STANDARD_LIBRARIES=-Wl$(comma)-z$(comma)undefs)
	cmake --build $(BUILD_LIBFUZZER) -j $(JOBS) --target md_fuzz_targets
	@echo "fuzz-build: AFL++ targets in $(BUILD_FUZZ)/fuzz (and -asan, -cmplog), libFuzzer in $(BUILD_LIBFUZZER)/fuzz"

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(BUILD_BENCH) $(BUILD_FUZZ) $(BUILD_FUZZ)-asan $(BUILD_FUZZ)-cmplog $(BUILD_LIBFUZZER)
