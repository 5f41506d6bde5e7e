#!/usr/bin/env bash
# The GPU check, one call on a machine with a CUDA GPU, a CUDA PyTorch for python3 and no network (about
# 8 minutes on an H200). Before, on the Debian machine: scripts/fetch_gpu_deps.sh, then carry deps/ and
# data/kjv/ along with the working tree. It
#   1. unpacks deps/debs/*.deb into deps/root and builds lmtrain against python3's LibTorch into build-gpu/
#      (docs/install.md "Building against a CUDA LibTorch");
#   2. runs the test suite there (the CUDA tests run instead of skipping);
#   3. runs the GPU benchmark (scripts/bench_gpu.py: lmtrain vs the team's PyTorch eager baseline);
#   4. exports the benchmark's KJV model to Hugging Face form and compares transformers' probabilities and
#      token ids with lmtrain's (scripts/check_hf_export.py --transformers);
#   5. prints one table last. Logs: build-gpu/{build,ctest,bench,hf}.log.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d deps/debs ] || { echo "gpu_check: deps/debs missing: run scripts/fetch_gpu_deps.sh on the Debian machine and carry deps/"; exit 2; }
ROOT=$PWD/deps/root
rm -rf "$ROOT" && mkdir -p "$ROOT"
for d in deps/debs/*.deb; do dpkg -x "$d" "$ROOT"; done
# Debian's libraries use the C++11 ABI; a LibTorch built with the old one cannot link with them.
python3 -c 'import sys, torch; sys.exit(0 if torch.compiled_with_cxx11_abi() else 1)' ||
  { echo "gpu_check: this torch uses the pre-C++11 ABI; Debian's libraries need the C++11 one"; exit 2; }
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$ROOT/usr/lib/x86_64-linux-gnu:$TORCH_LIB:${LD_LIBRARY_PATH:-}"
export PATH="$ROOT/usr/bin:$PATH"  # Debian's ninja
mkdir -p build-gpu
start=$(date +%s)
{
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
    -DLMTRAIN_DEPS_PREFIX="$ROOT/usr" -DOPENSSL_ROOT_DIR="$ROOT/usr"
  cmake --build build-gpu -j"$(nproc)"
} > build-gpu/build.log 2>&1 || { tail -40 build-gpu/build.log; echo "gpu_check: build failed"; exit 1; }
built=$(( $(date +%s) - start ))
set +e
( cd build-gpu && ctest -j8 --output-on-failure --timeout 300 ) > build-gpu/ctest.log 2>&1
tests_rc=$?
python3 scripts/bench_gpu.py --lmtrain build-gpu/lmtrain --out build-gpu/bench > build-gpu/bench.log 2>&1
bench_rc=$?
# transformers, where installed: the HF export of the benchmark's KJV model against lmtrain's probabilities
HF_CKPT=build-gpu/bench/S_fp32
TEXT="In the beginning God created the heaven and the earth."
TRANSFORMERS=(--transformers --text "$TEXT")
python3 -c 'import transformers' 2>/dev/null || TRANSFORMERS=()  # then the independent GPT-2 forward only
{
  build-gpu/lmtrain export --checkpoint "$HF_CKPT" --format hf --out build-gpu/hf &&
  build-gpu/lmtrain inspect probs --checkpoint "$HF_CKPT" --text "$TEXT" --json -k 5 > build-gpu/hf-probs.json &&
  python3 scripts/check_hf_export.py build-gpu/hf build-gpu/hf-probs.json --tol 1e-5 "${TRANSFORMERS[@]}"
} > build-gpu/hf.log 2>&1
hf_rc=$?
set -e
grep -E "tests passed|tests failed|Failed|Skipped" build-gpu/ctest.log | head -20 || true
echo
echo "== gpu_check: build ${built}s (LibTorch $(python3 -c 'import torch; print(torch.__version__)')), tests rc=$tests_rc, bench rc=$bench_rc, transformers check rc=$hf_rc"
tail -3 build-gpu/hf.log || true
grep -h "CUDA code enabled\|CPU-only LibTorch" build-gpu/build.log || true
cat build-gpu/bench.log
