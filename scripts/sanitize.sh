#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer: builds lmtrain, lmtrain_faults and the tests with clang in
# build-sanitize/ (shared with scripts/fuzz.sh), then runs every CTest test under both sanitizers: the unit
# tests, the integration tests and the bad-input and fault matrix (docs/FAULT_MATRIX.md), whose subprocesses
# are the sanitized binaries too. Any report fails the run (halt on the first error, non-zero exit).
# The SentencePiece bridge is not instrumented and is loaded with dlmopen in ASan builds
# (docs/testing.md "Sanitizers"). Usage: scripts/sanitize.sh [ctest args...], e.g. -R Matrix
set -euo pipefail
cd "$(dirname "$0")/.."
export SETUP_WITH=clang BUILD_DIR=build-sanitize
export LMTRAIN_CMAKE_ARGS="-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLMTRAIN_SANITIZE=address,undefined -DLMTRAIN_FUZZ=ON"
bash scripts/setup.sh lmtrain lmtrain_faults lmtrain_tests
# LibTorch, OpenBLAS and Gloo are not instrumented; their one-time allocations at exit are not ours.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:halt_on_error=1:exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86"
cd build-sanitize
start=$(date +%s)
ctest -j2 --output-on-failure --timeout 900 "$@"
echo "sanitize: every test passed under ASan+UBSan in $(( $(date +%s) - start )) s (exit code 86 = a sanitizer report)"
