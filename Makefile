# microtorch — the two commands of the README, and a few helpers.
#
#   make demo      install missing packages, configure, build, then train the Iris transformer,
#                  lower it to int16/int8 firmware and verify it on QEMU (examples/demo.cpp)
#   make test      the same, then the doctest suite, the API reference check (make docs),
#                  the notebooks, the suite again under ASan + UBSan (build-asan) and under
#                  TSan (build-tsan), every C++ example of README.md and docs/*.md compiled
#                  and run and their links resolved (tools/check_readme.py), the demo's
#                  figures rendered (tools/check_svg.py),
#                  the library installed into a prefix and used by a pkg-config and a CMake
#                  project (tools/check-install.sh), and a short run of each libFuzzer target
#                  (build-fuzz, clang); last line: "tests: N passed, M failed (release ...,
#                  docs ..., notebooks ..., readme ..., pictures ..., install ..., asan+ubsan ...,
#                  tsan ..., fuzz ...)" (tools/run-tests.sh)
#   make docs      the API reference, generated from the header comments by Doxygen
#                  (docs/Doxyfile) into $(BUILD)/docs/html/index.html; fails when a public
#                  symbol has no description or Doxygen warns (tools/check_docs.py)
#   make notebooks only the notebooks (examples/notebooks, run by tools/run_notebooks.py)
#   make fuzz      longer fuzzing: FUZZ_SECONDS per target (default 600)
#   make bench     benchmarks/ next to PyTorch in one process (tools/bench_table.py): one table
#                  (method and the published run: docs/benchmarks.md)
#   make bench-mcu the runtime kernels (tools/mcu/bench_kernels.sh), attention blocks lowered
#                  to firmware, measured under QEMU on Cortex-M0/M4/M7/M33, portable C and DSP
#                  variants side by side, and a stories260K-sized decoder's step per token
#                  (Cortex-M4/M7/M55) (tables on stdout and in $(BUILD)/mcu-bench.md;
#                  docs/mcu-benchmarks.md)
#   make bench-lower the lowering schemes on the PyTorch-trained transformers and Iris:
#                  accuracy, int8 share, flash, arena, Cortex-M4 instructions (QEMU); table on
#                  stdout and in $(BUILD)/lower-bench.md (docs/mcu-benchmarks.md, "Lowering
#                  schemes")
#
# Overrides: BUILD=dir (build directory, default build), JOBS=n (ninja -j),
#            MESON_ARGS='-Dnative=true ...' (used when BUILD is first configured),
#            TEST_ARGS='-tc=*matmul*' (doctest options),
#            NOTEBOOK_ARGS='02_attention' (tools/run_notebooks.py options; NOTEBOOKS=0 skips them),
#            SANITIZE=0 (skip the ASan/UBSan and TSan passes), FUZZ_SECONDS=n (per target; 0 skips),
#            INSTALL_CHECK=0 (skip the install check), DOCS_CHECK=0 (skip the API reference check),
#            DEMO_CHECK=0 (skip running the demo and comparing its table with the README),
#            DEMO_OUT=dir (demo output, default demo-output), DESTDIR=... (make install).
SHELL := bash
BUILD = build
JOBS =
MESON_ARGS =
TEST_ARGS =
DEMO_OUT = demo-output
NOTEBOOKS = 1
NOTEBOOK_ARGS =
INSTALL_CHECK = 1
DOCS_CHECK = 1
DEMO_CHECK = 1
# The sanitizer pass: its own build directory (-O1, no debug info, no examples: it is built
# on every clean CI run). It leaves out the cases that cross-compile and run firmware under
# QEMU or compile emitted C: their scripts run that C under ASan + UBSan themselves.
SANITIZE = 1
ASAN_BUILD = build-asan
ASAN_EXCLUDE = *QEMU*,*firmware*,*microtorch-lower*,*random small graphs*
# The ThreadSanitizer pass: the same suite (same exclusions) in a third build directory;
# OpenBLAS is not instrumented, so it sees the races of microtorch's own code.
TSAN_BUILD = build-tsan
# libFuzzer targets (tests/fuzz), built with clang in their own directory.
FUZZ_BUILD = build-fuzz
FUZZ_SECONDS = 10

.PHONY: deps build build-asan build-tsan build-fuzz test notebooks docs fuzz demo bench bench-mcu bench-lower install clean

deps:
	@tools/install-deps.sh

build: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD) --buildtype=release $(MESON_ARGS)
	ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS))

build-asan: deps
	@test -f $(ASAN_BUILD)/build.ninja || meson setup $(ASAN_BUILD) --buildtype=plain \
	  -Dcpp_args=-O1 -Dc_args=-O1 -Db_sanitize=address,undefined -Dexamples=false
	ninja -C $(ASAN_BUILD) $(if $(JOBS),-j $(JOBS))

build-tsan: deps
	@test -f $(TSAN_BUILD)/build.ninja || meson setup $(TSAN_BUILD) --buildtype=plain \
	  -Dcpp_args=-O1 -Dc_args=-O1 -Db_sanitize=thread -Dexamples=false -Dbenchmarks=disabled
	ninja -C $(TSAN_BUILD) $(if $(JOBS),-j $(JOBS))

build-fuzz: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CXX=clang++ CC=clang meson setup $(FUZZ_BUILD) \
	  --buildtype=debugoptimized -Db_sanitize=address,undefined -Ddefault_library=static -Db_lundef=false \
	  -Dfuzz=true -Dtests=false -Dexamples=false -Dbenchmarks=disabled
	ninja -C $(FUZZ_BUILD) $(if $(JOBS),-j $(JOBS))

# The suites and the fuzz runs; tools/run-tests.sh prints the one-line summary and fails
# when anything failed (a crash or a sanitizer report counts as a failure).
test: build $(if $(filter 1,$(SANITIZE)),build-asan build-tsan) $(if $(filter-out 0,$(FUZZ_SECONDS)),build-fuzz)
	@BUILD=$(BUILD) TEST_ARGS='$(TEST_ARGS)' ASAN_EXCLUDE='$(ASAN_EXCLUDE)' FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  NOTEBOOKS=$(NOTEBOOKS) NOTEBOOK_ARGS='$(NOTEBOOK_ARGS)' INSTALL_CHECK=$(INSTALL_CHECK) DOCS_CHECK=$(DOCS_CHECK) DEMO_CHECK=$(DEMO_CHECK) \
	  ASAN_BUILD=$(if $(filter 1,$(SANITIZE)),$(ASAN_BUILD)) TSAN_BUILD=$(if $(filter 1,$(SANITIZE)),$(TSAN_BUILD)) \
	  FUZZ_BUILD=$(FUZZ_BUILD) tools/run-tests.sh

# Longer fuzzing, e.g. make fuzz FUZZ_SECONDS=3600; findings land in build-fuzz/crash-*.
fuzz: FUZZ_SECONDS = 600
fuzz: build-fuzz
	@BUILD=$(BUILD) ASAN_BUILD= TSAN_BUILD= FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tools/run-tests.sh --fuzz-only

notebooks: build
	@python3 tools/run_notebooks.py --build $(BUILD) $(NOTEBOOK_ARGS)

# Needs Doxygen (installed by deps), not the build.
docs: deps
	@python3 tools/check_docs.py --build $(BUILD)

# The same float kernels on every AVX2 CPU (tools/pinned-kernels.sh): the table is the README's.
demo: build
	tools/pinned-kernels.sh $(BUILD)/examples/demo $(DEMO_OUT)

# Two builds and emulator runs at a time; the work folder is emptied on every run.
bench-mcu: build
	@set -o pipefail; { echo "### Kernels"; echo; tools/mcu/bench_kernels.sh; echo; } | tee $(BUILD)/mcu-bench.md
	@set -o pipefail; { echo "### Attention blocks"; echo; \
	  $(BUILD)/benchmarks/mcu/microtorch-mcu-bench --jobs 2 --work $(BUILD)/mcu-bench; } | tee -a $(BUILD)/mcu-bench.md
	@set -o pipefail; { echo; echo "### A decoder's step (stories260K-sized, 128 cached positions)"; echo; \
	  $(BUILD)/benchmarks/mcu/microtorch-mcu-decoder-bench --jobs 2 --work $(BUILD)/mcu-decoder-bench; } | tee -a $(BUILD)/mcu-bench.md
	@echo "bench-mcu: the tables are in $(BUILD)/mcu-bench.md; the published ones in docs/mcu-benchmarks.md"

# Fifteen firmwares (three models x five schemes), each verified and counted under QEMU; the
# float kernels pinned as for the demo, so the Iris model trains to the same bits everywhere.
bench-lower: build
	tools/pinned-kernels.sh $(BUILD)/benchmarks/lower/microtorch-lower-bench --work $(BUILD)/lower-bench \
	  --out $(BUILD)/lower-bench.md
	@echo "bench-lower: the table is in $(BUILD)/lower-bench.md; the published one in docs/mcu-benchmarks.md"

# Every benchmark step at 1 and 2 threads, microtorch and PyTorch back to back in one process
# (tools/bench_paired.py), then peak memory; python3-torch is installed when missing. A few
# minutes; the tables also land in $(BUILD)/bench/table.md.
bench: build
	@tools/install-deps.sh python3-torch
	@test -x $(BUILD)/benchmarks/microtorch-bench || { meson configure $(BUILD) -Dbenchmarks=enabled && ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS)); }
	/usr/bin/python3 tools/bench_table.py --build $(BUILD)

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
