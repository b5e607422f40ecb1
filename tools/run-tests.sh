#!/usr/bin/env bash
# tools/run-tests.sh — what `make test` runs once the builds are done: the doctest suite
# (release build; its attention cases again on the AVX2 and baseline kernels), the API
# reference check, the notebooks, the same suite under AddressSanitizer +
# UndefinedBehaviorSanitizer + LeakSanitizer and under ThreadSanitizer, and a short bounded
# run of every libFuzzer target. Ends with one line:
#
#   tests: N passed, M failed (release P/T, avx2 P/T, baseline P/T, docs P/T, notebooks P/T, readme P/T,
#                              pictures P/T, demo P/T, install P/T, asan+ubsan P/T, tsan P/T, fuzz P/T targets)
#
# N and M add up every doctest case of both suites and every fuzz target; a crash, a
# sanitizer report or a fuzzer finding counts as a failure, and the exit status is
# non-zero when M > 0. Settings come from the environment (the Makefile passes them):
#
#   BUILD=build  ASAN_BUILD=build-asan  TSAN_BUILD=build-tsan  FUZZ_BUILD=build-fuzz (each: empty skips)
#   TEST_ARGS='...'     doctest options for every suite
#   ASAN_EXCLUDE='...'  doctest -tce patterns the sanitizer passes leave out
#   FUZZ_SECONDS=10     per fuzz target
#   NOTEBOOKS=1         0 skips the notebooks (tools/run_notebooks.py); NOTEBOOK_ARGS its options
#   INSTALL_CHECK=1     0 skips tools/check-install.sh (install to a prefix, two consumers)
#   DOCS_CHECK=1        0 skips tools/check_docs.py (the API reference: one check per header)
#   DEMO_CHECK=1        0 skips tools/check_demo.py (make demo's program and its README table)
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD-build-asan}
TSAN_BUILD=${TSAN_BUILD-build-tsan}
FUZZ_BUILD=${FUZZ_BUILD-build-fuzz}
TEST_ARGS=${TEST_ARGS:-}
ASAN_EXCLUDE=${ASAN_EXCLUDE:-}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
NOTEBOOKS=${NOTEBOOKS:-1}
NOTEBOOK_ARGS=${NOTEBOOK_ARGS:-}
INSTALL_CHECK=${INSTALL_CHECK:-1}
DOCS_CHECK=${DOCS_CHECK:-1}
DEMO_CHECK=${DEMO_CHECK:-1}

total_passed=0
total_failed=0
parts=()

# tally LABEL RC PASSED FAILED LOG: adds one pass's counts to the totals; a non-zero exit
# status with no failure counted (a crash, a sanitizer report) counts as one failure.
tally() {
  local label=$1 rc=$2 passed=${3:-0} failed=${4:-0} log=$5
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then
    echo "make test: $label exited with status $rc (a crash or a sanitizer report; see $log)" >&2
    failed=1
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  parts+=("$label $passed/$((passed + failed))")
}

# run_suite LABEL BINARY LOG [doctest args...]: runs the suite and tallies doctest's
# "[doctest] test cases: T | P passed | F failed" line.
run_suite() {
  local label=$1 bin=$2 log=$3
  shift 3
  "$bin" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} summary
  summary=$(sed -E 's/\x1b\[[0-9;]*m//g' "$log" | grep -a '\[doctest\] test cases:' | tail -n 1)
  tally "$label" "$rc" "$(sed -nE 's/.*[|] *([0-9]+) passed.*/\1/p' <<<"$summary")" \
    "$(sed -nE 's/.*[|] *([0-9]+) failed.*/\1/p' <<<"$summary")" "$log"
}

# run_check LABEL PREFIX LOG COMMAND...: runs a checker whose last summary line is
# "PREFIX: N passed, M failed" and tallies it.
run_check() {
  local label=$1 prefix=$2 log=$3
  shift 3
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} summary
  summary=$(grep -a "^$prefix: [0-9]* passed" "$log" | tail -n 1)
  tally "$label" "$rc" "$(sed -nE "s/^$prefix: ([0-9]+) passed.*/\1/p" <<<"$summary")" \
    "$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$summary")" "$log"
}

fuzz_only=false
[[ ${1:-} == --fuzz-only ]] && fuzz_only=true  # make fuzz

if ! $fuzz_only; then
  # shellcheck disable=SC2086  # TEST_ARGS is a list of options
  run_suite release "$BUILD/tests/microtorch-tests" "$BUILD/tests/last-run.log" $TEST_ARGS
  # The attention kernels are compiled for AVX-512, AVX2 and the baseline ISA and run the
  # best this CPU has; MICROTORCH_ISA caps it, so the cases that check attention (against
  # the composed definition, finite differences and the SDPA fixtures, the additive bias's
  # gradient among them) run again on the two lesser ones (src/parallel.cpp picks the ISA).
  for isa in avx2 baseline; do
    echo
    echo "== the attention cases again with MICROTORCH_ISA=$isa"
    # shellcheck disable=SC2086
    MICROTORCH_ISA=$isa run_suite "$isa" "$BUILD/tests/microtorch-tests" "$BUILD/tests/last-run-$isa.log" \
      '-sf=*test_attention.cpp,*test_mask.cpp,*test_oracle.cpp,*test_hostile_inputs.cpp' \
      $TEST_ARGS
  done
fi

# The API reference built with Doxygen, one check per header: every public symbol
# described, no Doxygen warning. "check-docs: N passed, M failed".
if [[ $DOCS_CHECK != 0 ]] && ! $fuzz_only; then
  echo
  echo "== docs: the API reference from the headers (docs/Doxyfile), every public symbol described"
  run_check docs check-docs "$BUILD/docs-check.log" python3 tools/check_docs.py --build "$BUILD"
fi

# Each notebook compiled and run as a program: "notebooks: N passed, M failed".
if [[ $NOTEBOOKS != 0 ]] && ! $fuzz_only; then
  echo
  # shellcheck disable=SC2086
  run_check notebooks notebooks "$BUILD/notebooks-last-run.log" python3 tools/run_notebooks.py --build "$BUILD" $NOTEBOOK_ARGS
fi

# Every C++ example of README.md and docs/*.md compiled and run, every link of theirs
# resolved (tools/check_readme.py).
if ! $fuzz_only; then
  echo
  echo "== README.md and docs/*.md: every C++ example compiled (C++20) and run, every link resolved"
  run_check readme readme "$BUILD/readme-check.log" python3 tools/check_readme.py --build "$BUILD"
fi

# The demo's figures rendered by rsvg-convert: they render, and no text leaves the canvas.
if ! $fuzz_only; then
  echo
  echo "== pictures: the demo's figures rendered with rsvg-convert (tools/check_svg.py)"
  run_check pictures pictures "$BUILD/pictures-check.log" python3 tools/check_svg.py --build "$BUILD"
fi

# make demo's program (train, lower, verify on QEMU) and its table against README.md.
if [[ $DEMO_CHECK != 0 ]] && ! $fuzz_only; then
  echo
  echo "== demo: make demo's program run, its table compared with README.md (tools/check_demo.py)"
  run_check demo demo "$BUILD/demo-check.log" python3 tools/check_demo.py --build "$BUILD"
fi

# The library installed into a prefix and used by a pkg-config and a CMake project.
if [[ $INSTALL_CHECK != 0 ]] && ! $fuzz_only; then
  echo
  echo "== install: a library-only build into a temporary prefix, used by two out-of-tree projects"
  run_check install check-install "$BUILD/install-check.log" tools/check-install.sh
fi

if [[ -n $ASAN_BUILD ]] && ! $fuzz_only; then
  echo
  echo "== the suite again under AddressSanitizer + UndefinedBehaviorSanitizer ($ASAN_BUILD)"
  exclude=()
  [[ -n $ASAN_EXCLUDE ]] && exclude=("-tce=$ASAN_EXCLUDE")
  # halt_on_error: a UBSan report fails the run instead of scrolling past. LeakSanitizer
  # is on (ASan's default on Linux): a leaked graph or tensor fails the run at exit.
  # shellcheck disable=SC2086
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_suite asan+ubsan "$ASAN_BUILD/tests/microtorch-tests" "$ASAN_BUILD/tests/last-run.log" \
    "${exclude[@]}" $TEST_ARGS
fi

if [[ -n $TSAN_BUILD ]] && ! $fuzz_only; then
  echo
  echo "== the suite again under ThreadSanitizer ($TSAN_BUILD)"
  exclude=()
  [[ -n $ASAN_EXCLUDE ]] && exclude=("-tce=$ASAN_EXCLUDE")
  # halt_on_error: the first data race fails the run. OpenBLAS is not instrumented, so its
  # own threads are invisible here; microtorch's (the attention pool, user threads) are not.
  # shellcheck disable=SC2086
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=tools/tsan.supp \
    run_suite tsan "$TSAN_BUILD/tests/microtorch-tests" "$TSAN_BUILD/tests/last-run.log" "${exclude[@]}" $TEST_ARGS
fi

if [[ -n $FUZZ_BUILD && $FUZZ_SECONDS -gt 0 ]]; then
  echo
  echo "== libFuzzer targets, ${FUZZ_SECONDS}s each, from the committed seeds in tests/fuzz/corpus ($FUZZ_BUILD)"
  fuzz_passed=0
  fuzz_failed=0
  for fuzzer in "$FUZZ_BUILD"/tests/fuzz/fuzz_*; do
    [[ -x $fuzzer && -f $fuzzer ]] || continue
    name=${fuzzer##*/fuzz_}
    # New inputs go to a scratch directory; the committed corpus is only read.
    scratch="$FUZZ_BUILD/corpus/$name"
    mkdir -p "$scratch"
    log="$FUZZ_BUILD/fuzz-$name.log"
    dict=()
    [[ -f tests/fuzz/$name.dict ]] && dict=("-dict=tests/fuzz/$name.dict")
    if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$fuzzer" "$scratch" "tests/fuzz/corpus/$name" \
      "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -artifact_prefix="$FUZZ_BUILD/crash-$name-" >"$log" 2>&1; then
      echo "fuzz_$name: ok, $(grep -aoE '#[0-9]+' "$log" | tail -n 1 | tr -d '#') runs"
      fuzz_passed=$((fuzz_passed + 1))
    else
      echo "fuzz_$name: FAILED; the input is in $FUZZ_BUILD/crash-$name-*, the report in $log:" >&2
      tail -n 30 "$log" >&2
      fuzz_failed=$((fuzz_failed + 1))
    fi
  done
  total_passed=$((total_passed + fuzz_passed))
  total_failed=$((total_failed + fuzz_failed))
  parts+=("fuzz $fuzz_passed/$((fuzz_passed + fuzz_failed)) targets")
fi

summary=$(IFS=,; echo "${parts[*]}" | sed 's/,/, /g')
echo "tests: $total_passed passed, $total_failed failed ($summary)"
[[ $total_failed -eq 0 ]]
