#!/usr/bin/env bash
# Multi-process benchmark (not a test): config S (V 8192, C 256, L 4, H 4, T 128) on the KJV split, the same
# global batch of 16 sequences trained by 1 process (B 16; 1 thread, then 2) and by 2 processes of 1 thread
# (B 8 each, --nproc 2), with the gradient all-reduce overlapped with the backward pass and not. Prints each run's tokens/s over the timed
# steps, its ratio to the 1-process run of the same invocation, and the all-reduce wait per step as a share
# of the step. Usage: scripts/bench_dist.sh [STEPS]   (default 60; the first 10 steps are not timed)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
bash scripts/setup.sh lmtrain >/dev/null
[ -f data/kjv/train.txt ] || bash scripts/get_corpus.sh kjv
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# One tokenizer and token files for all runs, so the runs time training only.
COMMON=(-c configs/kjv-small.yaml --set model.d_model=256 --set train.max_steps="$STEPS" --set train.eval_every=0
        --set train.log_every=10 --set checkpoint.every=0 --set train.warmup_steps=5)
build/lmtrain train "${COMMON[@]}" --set run.dir="$OUT/prep" --set train.max_steps=1 --set train.warmup_steps=0 >/dev/null 2>&1
run() {  # name, extra args...
  local name=$1; shift
  mkdir -p "$OUT/$name"
  cp "$OUT"/prep/{tokenizer.model,tokenizer.model.json,train.bin,val.bin} "$OUT/$name/" 2>/dev/null || true
  build/lmtrain train "${COMMON[@]}" --set run.dir="$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
  # tokens/s and all-reduce share, averaged over the log lines after step 10
  awk -v name="$name" '/step [0-9]+\/[0-9]+ \|/ {
      match($0, /step [0-9]+/); s = substr($0, RSTART + 5, RLENGTH - 5) + 0
      if (s <= 10) next
      match($0, /[0-9]+ tok\/s/); tps += substr($0, RSTART, RLENGTH - 6) + 0; n++
      if (match($0, /\([0-9.]+%\)/)) { share += substr($0, RSTART + 1, RLENGTH - 3) + 0 }
    } END { printf "%s %.0f %.1f\n", name, tps / n, share / n }' "$OUT/$name.log"
}
{
  run one_process --set train.batch_size=16
  run one_process_2_threads --set train.batch_size=16 --set run.threads=2
  run two_processes --set train.batch_size=8 --nproc 2
  run two_no_overlap --set train.batch_size=8 --set dist.overlap=false --nproc 2
} > "$OUT/results"
base=$(awk '$1 == "one_process" {print $2}' "$OUT/results")
echo "config S, global batch 16 x 128 tokens, $STEPS steps, $(nproc) cores"
printf "%-22s %10s %8s %22s\n" run "tokens/s" "ratio" "all-reduce wait/step"
awk -v base="$base" '{ printf "%-22s %10d %7.2fx %21s\n", $1, $2, $2 / base, ($1 ~ /^one/ ? "-" : $3 "%") }' "$OUT/results"
