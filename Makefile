# microtorch — the two commands of the README, and a few helpers.
#
#   make demo      install missing packages, configure, build, run the example
#   make test      the same, then the doctest suite, the suite again under ASan + UBSan
#                  (build-asan), and a short run of each libFuzzer target (build-fuzz, clang);
#                  last line: "tests: N passed, M failed (release ..., asan+ubsan ..., fuzz ...)"
#   make fuzz      longer fuzzing: FUZZ_SECONDS per target (default 600)
#
# Overrides: BUILD=dir (build directory, default build), JOBS=n (ninja -j),
#            MESON_ARGS='-Dnative=true ...' (used when BUILD is first configured),
#            TEST_ARGS='-tc=*matmul*' (doctest options), DESTDIR=... (make install),
#            SANITIZE=0 (skip the ASan/UBSan pass), FUZZ_SECONDS=n (per target; 0 skips).
SHELL := bash
BUILD = build
JOBS =
MESON_ARGS =
TEST_ARGS =
# The sanitizer pass: its own build directory (debugoptimized, no examples). It leaves out
# the test case that cross-compiles and runs the kernels under QEMU: that script already
# runs the same kernels under ASan + UBSan on the host, and the QEMU runs gain nothing.
SANITIZE = 1
ASAN_BUILD = build-asan
ASAN_EXCLUDE = *QEMU*
# libFuzzer targets (tests/fuzz), built with clang in their own directory.
FUZZ_BUILD = build-fuzz
FUZZ_SECONDS = 10

.PHONY: deps build build-asan build-fuzz test fuzz demo install clean

deps:
	@tools/install-deps.sh

build: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD) --buildtype=release $(MESON_ARGS)
	ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS))

build-asan: deps
	@test -f $(ASAN_BUILD)/build.ninja || meson setup $(ASAN_BUILD) --buildtype=debugoptimized \
	  -Db_sanitize=address,undefined -Dexamples=false
	ninja -C $(ASAN_BUILD) $(if $(JOBS),-j $(JOBS))

build-fuzz: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CXX=clang++ CC=clang meson setup $(FUZZ_BUILD) \
	  --buildtype=debugoptimized -Db_sanitize=address,undefined -Ddefault_library=static -Db_lundef=false \
	  -Dfuzz=true -Dtests=false -Dexamples=false
	ninja -C $(FUZZ_BUILD) $(if $(JOBS),-j $(JOBS))

# The suites and the fuzz runs; tools/run-tests.sh prints the one-line summary and fails
# when anything failed (a crash or a sanitizer report counts as a failure).
test: build $(if $(filter 1,$(SANITIZE)),build-asan) $(if $(filter-out 0,$(FUZZ_SECONDS)),build-fuzz)
	@BUILD=$(BUILD) TEST_ARGS='$(TEST_ARGS)' ASAN_EXCLUDE='$(ASAN_EXCLUDE)' FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  ASAN_BUILD=$(if $(filter 1,$(SANITIZE)),$(ASAN_BUILD)) FUZZ_BUILD=$(FUZZ_BUILD) tools/run-tests.sh

# Longer fuzzing, e.g. make fuzz FUZZ_SECONDS=3600; findings land in build-fuzz/crash-*.
fuzz: FUZZ_SECONDS = 600
fuzz: build-fuzz
	@BUILD=$(BUILD) ASAN_BUILD= FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tools/run-tests.sh --fuzz-only

demo: build
	$(BUILD)/examples/train_mlp

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
