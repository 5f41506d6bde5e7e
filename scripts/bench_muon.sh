#!/usr/bin/env bash
# Steps to quality (issue 14): AdamW against Muon (train.optimizer: muon) on the KJV quickstart split with
# config S (configs/kjv-small.yaml at d_model 256: V 8192, C 256, L 4, H 4, T 128, B 16). AdamW trains its
# 350-step schedule; Muon trains a schedule of MUON_STEPS steps (default 245 = 70% of 350). Both validate
# every 25 steps on 64 evenly spread windows (the curves) and on the whole val file at their last step (the
# comparison). Prints both curves and the two final validation losses. Output: docs/BENCHMARKS.md.
# Usage: scripts/bench_muon.sh [--set KEY=VALUE ...]   (extra --set apply to the Muon run only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh lmtrain
[ -f data/kjv/train.txt ] || bash scripts/get_corpus.sh kjv
out=${BENCH_OUT:-build/bench-muon}
adamw_steps=${ADAMW_STEPS:-350}
muon_steps=${MUON_STEPS:-245}
common=(-c configs/kjv-small.yaml --set model.d_model=256 --set train.eval_every=25 --set train.eval_batches=64
        --set checkpoint.every=0 --overwrite)
run() {  # NAME STEPS ARGS...
  local name=$1 steps=$2
  shift 2
  echo "== $name: $steps steps"
  build/lmtrain train "${common[@]}" --set "run.dir=$out/$name" --set "train.max_steps=$steps" "$@" \
    > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log"; exit 1; }
  grep "final validation loss" "$out/$name.log"
}
mkdir -p "$out"
[ -n "${SKIP_ADAMW:-}" ] || run adamw "$adamw_steps"
run muon "$muon_steps" --set train.optimizer=muon "$@"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def speed(name):
    rates = [r["tokens_per_s"] for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl")) if r["kind"] == "train"]
    return statistics.median(rates[1:])
def read(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    val = {r["step"]: r["loss"] for r in rows if r["kind"] == "val" and not r.get("full")}
    final = [r for r in rows if r["kind"] == "val" and r.get("full")]
    return val, final[-1]
a, af = read("adamw")
m, mf = read("muon")
print("step  AdamW val (64 windows)  Muon val (64 windows)")
for s in sorted(set(a) | set(m)):
    fa = f"{a[s]:.4f}" if s in a else "-"
    fm = f"{m[s]:.4f}" if s in m else "-"
    print(f"{s:4d}  {fa:>22}  {fm:>21}")
print(f"final (whole val file): AdamW {af['loss']:.4f} at step {af['step']}, Muon {mf['loss']:.4f} at step {mf['step']}"
      f" ({mf['step'] / af['step']:.0%} of the steps): Muon {'reaches' if mf['loss'] <= af['loss'] else 'does not reach'}"
      " AdamW's loss")
print(f"training speed (median of the logged windows): AdamW {speed('adamw'):,.0f} tokens/s, Muon {speed('muon'):,.0f}"
      f" ({speed('muon') / speed('adamw'):.2f}x)")
PY
