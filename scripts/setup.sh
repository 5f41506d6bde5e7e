#!/usr/bin/env bash
# Installs every Debian package lmtrain needs (idempotent, non-interactive), then configures and builds
# Release into build/. Works as root on a bare Debian bookworm; uses sudo when not root.
# Usage: scripts/setup.sh [cmake targets...]   (default: everything, tests included)
# SETUP_WITH=clang adds clang and its sanitizer/libFuzzer runtimes (scripts/sanitize.sh, scripts/fuzz.sh);
# LMTRAIN_CMAKE_ARGS are passed to cmake when BUILD_DIR is configured for the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  dpkg-dev file binutils  # `cpack -G DEB` (dpkg-shlibdeps finds the Depends; CPack needs `file`); readelf in the install test
  libtorch-dev libopenblas0-pthread
  libdnnl-dev  # oneDNN's headers: the fused kernels' bf16 products (the libdnnl.so.2 LibTorch already loads)
  libsentencepiece-dev
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libssl-dev
  libgtest-dev libgloo-dev
  python3 python3-torch python3-numpy
  gnuplot-nox
  debian-faq debian-faq-ko  # the FAQ corpora (scripts/get_corpus.sh); tests/corpus_join_test.py reads them
  chromium  # headless, for the report's browser test (tests/report_browser_test.py); lmtrain never needs it
)

if [ "${SETUP_WITH:-}" = clang ]; then PACKAGES+=(clang libclang-rt-14-dev); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

# ccache: the precompiled LibTorch header needs these to be cacheable.
# CCACHE_BASEDIR makes cache keys path-independent, so a fresh clone (CI) reuses earlier compilations.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
BUILD_DIR="${BUILD_DIR:-build}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086  # LMTRAIN_CMAKE_ARGS is a list of words
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${LMTRAIN_CMAKE_ARGS:-}
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" "${targets[@]}"
echo "setup: built ${*:-all targets} in $BUILD_DIR"

# llama.cpp for the GGUF check (scripts/check_gguf.mjs, tests/gguf_test.cpp): node-llama-cpp's prebuilt CPU
# binaries, pinned, from the npm registry into $BUILD_DIR/llama-node (83 MB; lmtrain never needs it). It needs
# node >= 20; bookworm's own nodejs is 18, so setup does not install node. When node or npm is missing or the
# install fails, setup says why and goes on, and the GGUF check skips with that reason.
LLAMA_NODE="$BUILD_DIR/llama-node"
LLAMA_NODE_VERSION=3.21.1
if [ -f "$LLAMA_NODE/node_modules/node-llama-cpp/package.json" ] &&
   grep -q "\"version\": \"$LLAMA_NODE_VERSION\"" "$LLAMA_NODE/node_modules/node-llama-cpp/package.json"; then
  echo "setup: node-llama-cpp $LLAMA_NODE_VERSION present in $LLAMA_NODE"
elif ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "setup: no node/npm on PATH: the llama.cpp check of GGUF exports will skip (it needs node >= 20)"
elif ! node -e 'process.exit(parseInt(process.versions.node, 10) >= 20 ? 0 : 1)'; then
  echo "setup: node $(node --version) is older than 20: the llama.cpp check of GGUF exports will skip"
else
  mkdir -p "$LLAMA_NODE"
  if npm install --prefix "$LLAMA_NODE" --save-exact --omit=optional --no-audit --no-fund --loglevel=error \
       "node-llama-cpp@$LLAMA_NODE_VERSION" "@node-llama-cpp/linux-x64@$LLAMA_NODE_VERSION"; then
    echo "setup: installed node-llama-cpp $LLAMA_NODE_VERSION into $LLAMA_NODE"
  else
    echo "setup: npm could not install node-llama-cpp $LLAMA_NODE_VERSION: the llama.cpp check of GGUF exports will skip"
  fi
fi
