#!/usr/bin/env bash
# Sampling benchmark (not a test): on the quickstart checkpoint, a 16-token prompt and 256 new tokens,
# ms per token with the key/value cache and with a full recompute of the window per token, and their
# ratio, all in one invocation (so a noisy machine affects both alike); then the cached decode in fp32
# against bf16 products (--precision), ROUNDS alternated processes each, and where their greedy 64-token
# continuations part, if they do. Runs the quickstart first when its checkpoint is missing.
# Usage: scripts/bench_sample.sh [CHECKPOINT] [REPEATS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=${1:-runs/kjv-small}
REPEATS=${2:-5}
ROUNDS=${3:-3}
bash scripts/setup.sh lmtrain >/dev/null
if [ "$CKPT" = runs/kjv-small ] && [ ! -f runs/kjv-small/latest ]; then bash scripts/quickstart.sh; fi
# 15 pieces of KJV text + the implied line start = 16 prompt tokens with the quickstart tokenizer
PROMPT="In the beginning God created the heaven and the earth. And the earth was"
build/lmtrain sample --checkpoint "$CKPT" --prompt "$PROMPT" --generate 256 \
  --temperature 0.8 --top-k 40 --seed 1 --bench "$REPEATS" --precision fp32
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "bf16 flags: $(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
declare -A runs=([fp32]="" [bf16]="")
for _ in $(seq "$ROUNDS"); do
  for p in fp32 bf16; do
    ms=$(build/lmtrain sample --checkpoint "$CKPT" --prompt "$PROMPT" --generate 256 --temperature 0.8 --top-k 40 \
           --seed 1 --bench "$REPEATS" --precision "$p" 2>/dev/null | awk '/^kv cache:/ {print $3}')
    runs[$p]="${runs[$p]} $ms"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
f=$(echo "${runs[fp32]}" | median)
b=$(echo "${runs[bf16]}" | median)
echo "kv cache, ms/token, $ROUNDS alternated processes each (median of $REPEATS runs in each): fp32${runs[fp32]} -> $f;" \
     "bf16${runs[bf16]} -> $b; bf16 / fp32 = $(awk -v b="$b" -v f="$f" 'BEGIN {printf "%.2f", b / f}')"
greedy() {
  build/lmtrain sample --checkpoint "$CKPT" --prompt "$PROMPT" --generate 64 --temperature 0 --show-ids \
    --precision "$1" 2>/dev/null | awk '/^sample 1 of 1/ {on = 1; next} on'
}
g32=$(greedy fp32)
g16=$(greedy bf16)
if [ "$g32" = "$g16" ]; then
  echo "greedy, 64 tokens: fp32 and bf16 give the same continuation"
else
  echo "greedy, 64 tokens: fp32 and bf16 part; fp32:"
  echo "$g32"
  echo "bf16:"
  echo "$g16"
fi
