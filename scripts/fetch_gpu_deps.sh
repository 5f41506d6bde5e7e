#!/usr/bin/env bash
# Run on the Debian bookworm development machine (package archive reachable): downloads the .debs that
# scripts/gpu_check.sh unpacks on a GPU machine without network, into deps/debs/ (git-ignored), and
# makes sure the KJV corpus is in data/kjv/ for the benchmark. Then carry deps/ and data/kjv/ there.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev
  libsentencepiece-dev libsentencepiece0 nlohmann-json3-dev libssl-dev libssl3 libgtest-dev libgloo-dev ninja-build
)
mkdir -p deps/debs
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
( cd deps/debs && apt-get download "${PACKAGES[@]}" 2>/dev/null ) || {
  $SUDO apt-get update -qq
  ( cd deps/debs && apt-get download "${PACKAGES[@]}" )
}
[ -s data/kjv/train.txt ] && [ -s data/kjv/val.txt ] || bash scripts/get_corpus.sh kjv
echo "fetch_gpu_deps: $(ls deps/debs | wc -l) packages in deps/debs ($(du -sh deps/debs | cut -f1)); carry deps and data/kjv"
