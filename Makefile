# microtorch — the two commands of the README, and a few helpers.
#
#   make demo      install missing packages, configure, build, run the example
#   make test      the same, then the doctest suite; last line: "tests: N passed, M failed"
#   make bench     the same, then benchmarks/ next to PyTorch (tools/bench_table.py): one table
#
# Overrides: BUILD=dir (build directory, default build), JOBS=n (ninja -j),
#            MESON_ARGS='-Dnative=true ...' (used when BUILD is first configured),
#            TEST_ARGS='-tc=*matmul*' (doctest options), DESTDIR=... (make install).
SHELL := bash
BUILD = build
JOBS =
MESON_ARGS =
TEST_ARGS =

.PHONY: deps build test demo bench install clean

deps:
	@tools/install-deps.sh

build: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD) --buildtype=release $(MESON_ARGS)
	ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS))

# Runs the suite, then condenses doctest's "[doctest] test cases: T | P passed | F failed"
# into one line. A crash before the summary counts as a failure.
test: build
	@set +e; log=$(BUILD)/tests/last-run.log; \
	$(BUILD)/tests/microtorch-tests $(TEST_ARGS) 2>&1 | tee $$log; rc=$${PIPESTATUS[0]}; \
	summary=$$(sed -E 's/\x1b\[[0-9;]*m//g' $$log | grep -a '\[doctest\] test cases:' | tail -n 1); \
	passed=$$(sed -nE 's/.*[|] *([0-9]+) passed.*/\1/p' <<<"$$summary"); \
	failed=$$(sed -nE 's/.*[|] *([0-9]+) failed.*/\1/p' <<<"$$summary"); \
	passed=$${passed:-0}; failed=$${failed:-0}; \
	if [[ $$rc -ne 0 && $$failed -eq 0 ]]; then \
	  echo "make test: microtorch-tests exited with status $$rc" >&2; failed=1; fi; \
	echo "tests: $$passed passed, $$failed failed"; \
	[[ $$failed -eq 0 ]]

demo: build
	$(BUILD)/examples/train_mlp

# Medians of 5 runs, 1 and 2 threads, PyTorch columns when /usr/bin/python3 has torch
# (python3-torch). A few minutes; the table also lands in $(BUILD)/bench/table.md.
bench: build
	@test -x $(BUILD)/benchmarks/microtorch-bench || { meson configure $(BUILD) -Dbenchmarks=enabled && ninja -C $(BUILD) $(if $(JOBS),-j $(JOBS)); }
	/usr/bin/python3 tools/bench_table.py --build $(BUILD)

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD)
