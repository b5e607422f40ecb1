# microtorch — the two commands of the README, and a few helpers.
#
#   make demo      install missing packages, configure, build, then train the Iris transformer,
#                  lower it to int16/int8 firmware and verify it on QEMU (examples/demo.cpp)
#   make test      the same, then the doctest suite and the notebooks;
#                  last line: "tests: N passed, M failed" (notebooks included)
#   make notebooks only the notebooks (examples/notebooks, run by tools/run_notebooks.py)
#   make bench-mcu attention blocks lowered to Cortex-M4 firmware, measured under QEMU
#                  (table on stdout and in $(BUILD)/mcu-bench.md; README "MCU benchmark")
#   make bench     the same, then benchmarks/ next to PyTorch (tools/bench_table.py): one table
#
# Overrides: BUILD=dir (build directory, default build), JOBS=n (ninja -j),
#            MESON_ARGS='-Dnative=true ...' (used when BUILD is first configured),
#            TEST_ARGS='-tc=*matmul*' (doctest options),
#            NOTEBOOK_ARGS='02_attention' (tools/run_notebooks.py options; NOTEBOOKS=0 skips them),
#            DEMO_OUT=dir (demo output, default demo-output), DESTDIR=... (make install).
SHELL := bash
BUILD = build
JOBS =
MESON_ARGS =
TEST_ARGS =
DEMO_OUT = demo-output
NOTEBOOKS = 1
NOTEBOOK_ARGS =

.PHONY: deps build test notebooks demo bench bench-mcu install clean

deps:
	@tools/install-deps.sh

build: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD) --buildtype=release $(MESON_ARGS)
	ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS))

# Runs the suite, then condenses doctest's "[doctest] test cases: T | P passed | F failed"
# into one line. A crash before the summary counts as a failure. Then each notebook is
# compiled and run as a program (tools/run_notebooks.py prints "notebooks: N passed, M
# failed"); every notebook counts as one test in the final line.
test: build
	@set +e; log=$(BUILD)/tests/last-run.log; \
	$(BUILD)/tests/microtorch-tests $(TEST_ARGS) 2>&1 | tee $$log; rc=$${PIPESTATUS[0]}; \
	summary=$$(sed -E 's/\x1b\[[0-9;]*m//g' $$log | grep -a '\[doctest\] test cases:' | tail -n 1); \
	passed=$$(sed -nE 's/.*[|] *([0-9]+) passed.*/\1/p' <<<"$$summary"); \
	failed=$$(sed -nE 's/.*[|] *([0-9]+) failed.*/\1/p' <<<"$$summary"); \
	passed=$${passed:-0}; failed=$${failed:-0}; \
	if [[ $$rc -ne 0 && $$failed -eq 0 ]]; then \
	  echo "make test: microtorch-tests exited with status $$rc" >&2; failed=1; fi; \
	if [[ "$(NOTEBOOKS)" != 0 ]]; then \
	  nblog=$(BUILD)/notebooks-last-run.log; \
	  python3 tools/run_notebooks.py --build $(BUILD) $(NOTEBOOK_ARGS) 2>&1 | tee $$nblog; nbrc=$${PIPESTATUS[0]}; \
	  nbsummary=$$(grep -a '^notebooks: ' $$nblog | tail -n 1); \
	  nbpassed=$$(sed -nE 's/^notebooks: ([0-9]+) passed.*/\1/p' <<<"$$nbsummary"); \
	  nbfailed=$$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$$nbsummary"); \
	  nbpassed=$${nbpassed:-0}; nbfailed=$${nbfailed:-0}; \
	  if [[ $$nbrc -ne 0 && $$nbfailed -eq 0 ]]; then \
	    echo "make test: tools/run_notebooks.py exited with status $$nbrc" >&2; nbfailed=1; fi; \
	  passed=$$((passed + nbpassed)); failed=$$((failed + nbfailed)); \
	fi; \
	echo "tests: $$passed passed, $$failed failed"; \
	[[ $$failed -eq 0 ]]

notebooks: build
	@python3 tools/run_notebooks.py --build $(BUILD) $(NOTEBOOK_ARGS)

demo: build
	$(BUILD)/examples/demo $(DEMO_OUT)

# Two builds and emulator runs at a time; the work folder is emptied on every run.
bench-mcu: build
	$(BUILD)/benchmarks/mcu/microtorch-mcu-bench --jobs 2 --work $(BUILD)/mcu-bench --out $(BUILD)/mcu-bench.md

# Medians of 5 runs, 1 and 2 threads, PyTorch columns when /usr/bin/python3 has torch
# (python3-torch). A few minutes; the table also lands in $(BUILD)/bench/table.md.
bench: build
	@test -x $(BUILD)/benchmarks/microtorch-bench || { meson configure $(BUILD) -Dbenchmarks=enabled && ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS)); }
	/usr/bin/python3 tools/bench_table.py --build $(BUILD)

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD)
