#!/usr/bin/env bash
# Set-up (packages + build) if needed, then every test through CTest. Non-zero exit on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j2 "$@"
