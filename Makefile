# microtorch — the two commands of the README, and a few helpers.
#
#   make demo      install missing packages, configure, build, then train the Iris transformer,
#                  lower it to int16/int8 firmware and verify it on QEMU (examples/demo.cpp)
#   make test      the same, then the doctest suite; last line: "tests: N passed, M failed"
#
# Overrides: BUILD=dir (build directory, default build), JOBS=n (ninja -j),
#            MESON_ARGS='-Dnative=true ...' (used when BUILD is first configured),
#            TEST_ARGS='-tc=*matmul*' (doctest options), DEMO_OUT=dir (demo output, default
#            demo-output), DESTDIR=... (make install).
SHELL := bash
BUILD = build
JOBS =
MESON_ARGS =
TEST_ARGS =
DEMO_OUT = demo-output

.PHONY: deps build test demo install clean

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
	$(BUILD)/examples/demo $(DEMO_OUT)

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD)
