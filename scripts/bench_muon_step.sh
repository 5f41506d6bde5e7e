#!/usr/bin/env bash
# Muon's step at its cost (issue 34): config S (configs/kjv-small.yaml at d_model 256) on KJV, 80 steps each of
# AdamW, Muon with fp32 Newton-Schulz products and Muon with train.muon_precision auto (bf16 where the CPU
# multiplies bf16 in hardware), alternated ROUNDS times (default 3) in one invocation, each run in its own
# process. Speed: the median tokens/s of steps 31-80 (the first 30 warm the allocator and the caches).
# Prints each round's figures and the ratios against the AdamW run of the same round. Output: docs/BENCHMARKS.md.
# Usage: scripts/bench_muon_step.sh [--set KEY=VALUE ...]   (extra --set apply to every run)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh lmtrain
[ -f data/kjv/train.txt ] || bash scripts/get_corpus.sh kjv
out=${BENCH_OUT:-build/bench-muon-step}
rounds=${ROUNDS:-3}
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for row in "adamw|train.optimizer=adamw" "muon-fp32|train.optimizer=muon train.muon_precision=fp32" \
             "muon-auto|train.optimizer=muon"; do
    name="${row%%|*}-$round"
    args=()
    for s in ${row#*|}; do args+=(--set "$s"); done
    echo "== $name"
    build/lmtrain train -c configs/kjv-small.yaml --set model.d_model=256 --set train.max_steps=80 \
      --set train.eval_every=0 --set train.log_every=1 --set checkpoint.every=0 --set "run.dir=$out/$name" \
      --overwrite "${args[@]}" "$@" > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log"; exit 1; }
  done
done
grep -h -o "Newton-Schulz steps in [a-z0-9]*[^,]*" "$out"/muon-auto-1.log || true
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def speed(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    return statistics.median(r["tokens_per_s"] for r in rows if r["kind"] == "train" and r["step"] > 30)
ratios = {"muon-fp32": [], "muon-auto": []}
print(f"{'round':>5} {'adamw tok/s':>12} {'muon fp32':>10} {'muon auto':>10} {'fp32/adamw':>11} {'auto/adamw':>11}")
for r in range(1, rounds + 1):
    a, f, b = speed(f"adamw-{r}"), speed(f"muon-fp32-{r}"), speed(f"muon-auto-{r}")
    ratios["muon-fp32"].append(f / a)
    ratios["muon-auto"].append(b / a)
    print(f"{r:5d} {a:12,.0f} {f:10,.0f} {b:10,.0f} {f / a:10.3f}x {b / a:10.3f}x")
print(f"mean: a Muon step is {statistics.mean(ratios['muon-fp32']):.3f}x an AdamW step with fp32 products, "
      f"{statistics.mean(ratios['muon-auto']):.3f}x with train.muon_precision auto")
PY
