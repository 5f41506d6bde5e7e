#!/usr/bin/env bash
# CPU time-to-quality benchmark: the fp32 and bf16 matrix-product ceilings, lmtrain's training step on configs S,
# V-small and T-long, and the team's tuned PyTorch eager reference, in one invocation; prints tokens/s, the
# ratio, model GFLOP/s and its fraction of the ceiling, and peak RSS. Output and command: docs/BENCHMARKS.md.
# Usage: scripts/bench.sh [--steps N] [--repeats R] [--precision auto|fp32|bf16]   (R alternated lmtrain/reference
#                          runs per config; medians; the fp32 and bf16 ceilings and an autocast row)
#        scripts/bench.sh --against OLD_LMTRAIN [--repeats R]   (config S only: this build against another one)
#        scripts/bench.sh --precision-table [--repeats R]   (config S under each kernel and precision choice and
#                          eager PyTorch under autocast, alternated: this CPU class's table, scripts/bench_precision.py)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh lmtrain
[ -f data/kjv/train.txt ] || bash scripts/get_corpus.sh kjv
# spm_encode, for the encoding comparison only (lmtrain itself links libsentencepiece).
if ! command -v spm_encode > /dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends sentencepiece
fi
if [ "${1:-}" = --precision-table ]; then
  shift
  exec /usr/bin/python3 scripts/bench_precision.py --lmtrain build/lmtrain --out build/bench "$@"
fi
/usr/bin/python3 scripts/bench_cpu.py --lmtrain build/lmtrain --out build/bench "$@"
