#!/usr/bin/env bash
# Sampling benchmark (not a test): on the quickstart checkpoint, a 16-token prompt and 256 new tokens,
# ms per token with the key/value cache and with a full recompute of the window per token, and their
# ratio, all in one invocation (so a noisy machine affects both alike). Runs the quickstart first when
# its checkpoint is missing. Usage: scripts/bench_sample.sh [CHECKPOINT] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=${1:-runs/kjv-small}
REPEATS=${2:-5}
bash scripts/setup.sh lmtrain >/dev/null
if [ "$CKPT" = runs/kjv-small ] && [ ! -f runs/kjv-small/latest ]; then bash scripts/quickstart.sh; fi
# 15 pieces of KJV text + the implied line start = 16 prompt tokens with the quickstart tokenizer
PROMPT="In the beginning God created the heaven and the earth. And the earth was"
build/lmtrain sample --checkpoint "$CKPT" --prompt "$PROMPT" --generate 256 \
  --temperature 0.8 --top-k 40 --seed 1 --bench "$REPEATS"
