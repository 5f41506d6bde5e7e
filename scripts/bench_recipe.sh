#!/usr/bin/env bash
# The recipe measured side by side (docs/recipe.md): config S (configs/kjv-small.yaml at d_model 256: V 8192,
# C 256, L 4, H 4, T 128, B 16) on the KJV split, or --corpus ko for configs/ko-faq.yaml at d_model 256.
# 1. The baseline (the GPT-2 recipe, AdamW, STEPS steps, default 350): its whole-val loss L0 and its training
#    wall time W0.
# 2. Each option alone on the baseline, then the options added one by one (cumulative rows).
# Every run validates on the whole val file every EVAL_EVERY (default 25) steps; wall time counts training
# only (each validation's time is left out). Each row gives the first validated step at or below L0, the
# training time to it, and the val loss at W0 (the last validation within W0).
# 3. configs/kjv-modern.yaml, when it exists: the file itself on KJV; its recipe keys on the Korean FAQ.
# 4. Speed, alternated: SPEED_ROUNDS rounds (default 3; 0 skips) of SPEED_STEPS-step runs (default 60, no
#    periodic validation), the baseline then each row in every round. A row's speed is the median seconds
#    per step of steps 11 onwards, its ratio the baseline's of the same round over it; the median of the
#    rounds' ratios is the tokens/s figure that stands up to a machine whose speed drifts over minutes.
#    SPEED_ONLY=1 skips steps 1-3 and prints the speed table alone.
# The runs follow one another in one invocation, each in its own process. Output: docs/BENCHMARKS.md.
# Usage: scripts/bench_recipe.sh [--corpus kjv|ko] [--rows NAME,NAME,...] [--set KEY=VALUE ...]
#                                [--candidate 'NAME|KEY=VALUE KEY=VALUE ...' ...]
#   (extra --set apply to every run; rows: see ROWS below; a --candidate is one more row, its --set list on
#   the baseline, or '@FILE KEY=VALUE ...' for a config file with overrides; --rows names it to run it alone)
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=kjv
only=""
extra=()
candidates=()
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) corpus=$2; shift 2 ;;
    --rows) only=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    --candidate) candidates+=("$2"); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bash scripts/setup.sh lmtrain
case "$corpus" in
  kjv) config=configs/kjv-small.yaml; [ -f data/kjv/train.txt ] || bash scripts/get_corpus.sh kjv ;;
  ko) config=configs/ko-faq.yaml; [ -f data/debian-faq-ko/train.txt ] || bash scripts/get_corpus.sh debian-faq-ko ;;
  *) echo "--corpus: expected kjv or ko, got $corpus" >&2; exit 2 ;;
esac
out=${BENCH_OUT:-build/bench-recipe-$corpus}
steps=${STEPS:-350}
eval_every=${EVAL_EVERY:-25}
# name|--set arguments on top of the baseline
ROWS=(
  "baseline|"
  "rope|model.positions=rope"
  "qk_norm|model.qk_norm=true"
  "relu2|model.mlp_activation=relu2"
  "no_bias|model.bias=false"
  "zero_init|model.zero_init_proj=true"
  "softcap|model.logit_softcap=15"
  "muon|train.optimizer=muon"
  "+rope|model.positions=rope"
  "+qk_norm|model.positions=rope model.qk_norm=true"
  "+relu2|model.positions=rope model.qk_norm=true model.mlp_activation=relu2"
  "+no_bias|model.positions=rope model.qk_norm=true model.mlp_activation=relu2 model.bias=false"
  "+zero_init|model.positions=rope model.qk_norm=true model.mlp_activation=relu2 model.bias=false model.zero_init_proj=true"
  "+softcap|model.positions=rope model.qk_norm=true model.mlp_activation=relu2 model.bias=false model.zero_init_proj=true model.logit_softcap=15"
  "+muon|model.positions=rope model.qk_norm=true model.mlp_activation=relu2 model.bias=false model.zero_init_proj=true model.logit_softcap=15 train.optimizer=muon"
)
# configs/kjv-modern.yaml's recipe: the file itself on KJV; on the Korean FAQ its recipe keys (not its sizes,
# data or schedule) on configs/ko-faq.yaml.
recipe_sets() {
  awk '/^[a-z_]+:/ { sec = $1; sub(":", "", sec) }
       /^  [a-z_]+:/ { k = $1; sub(":", "", k)
         if ((sec == "model" && k ~ /^(positions|rope_base|qk_norm|mlp_activation|bias|init_std|embedding_init_std|zero_init_proj|logit_softcap)$/) ||
             (sec == "train" && k ~ /^(optimizer|muon_lr|muon_momentum|muon_ns_steps|muon_precision)$/)) printf "%s.%s=%s ", sec, k, $2 }' configs/kjv-modern.yaml
}
if [ -f configs/kjv-modern.yaml ]; then
  if [ "$corpus" = kjv ]; then ROWS+=("kjv-modern|@configs/kjv-modern.yaml"); else ROWS+=("kjv-modern|$(recipe_sets)"); fi
fi
ROWS+=("${candidates[@]}")
seen=","
for row in "${ROWS[@]}"; do  # one run directory per name: a repeated name would overwrite a row
  if [[ "$seen" == *",${row%%|*},"* ]]; then echo "--candidate: the row name '${row%%|*}' is taken" >&2; exit 2; fi
  seen+="${row%%|*},"
done
mkdir -p "$out"
# run_row SETS DIR ARGS...: one run of a row (its --set list, or '@FILE KEY=VALUE ...') into DIR; its log
# beside DIR.
run_row() {
  local sets=$1 dir=$2 file
  shift 2
  local args=(-c "$config")
  if [[ "$sets" == @* ]]; then
    read -r file sets <<< "$sets"
    args=(-c "${file#@}")
  fi
  for s in $sets; do args+=(--set "$s"); done
  build/lmtrain train "${args[@]}" --set model.d_model=256 --set checkpoint.every=0 --set "run.dir=$dir" --overwrite \
    "$@" "${extra[@]}" > "$dir.log" 2>&1 || { tail -20 "$dir.log"; exit 1; }
}
names=()
specs=()
for row in "${ROWS[@]}"; do
  name=${row%%|*}
  sets=${row#*|}
  if [ -n "$only" ] && [ "$name" != baseline ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  names+=("$name")
  specs+=("$row")
  desc=${sets:-the baseline}
  [ "${SPEED_ONLY:-0}" = 1 ] && continue
  echo "== $name: ${desc#@}"
  run_row "$sets" "$out/$name" --set "train.max_steps=$steps" --set "train.eval_every=$eval_every" \
    --set train.eval_batches=1000000000 --set train.log_every=1
  grep "final validation loss" "$out/$name.log"
done
speed_rounds=${SPEED_ROUNDS:-3}
speed_steps=${SPEED_STEPS:-60}
for round in $(seq "$speed_rounds"); do
  for row in "${specs[@]}"; do
    echo "== speed, round $round: ${row%%|*}"
    run_row "${row#*|}" "$out/speed-$round-${row%%|*}" --set "train.max_steps=$speed_steps" \
      --set train.warmup_steps=10 --set train.eval_every=0 --set train.log_every=1
  done
done
/usr/bin/python3 - "$out" "$speed_rounds" "${SPEED_ONLY:-0}" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, speed_only, names = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
bpb = "ko" in out  # the Korean table in bits per byte

def curve(name):
    """[(step, training seconds so far, val loss)] for every periodic validation."""
    rows = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    trained, last, points = 0.0, None, []
    for r in rows:
        if r["kind"] == "train":
            if last is not None:
                trained += r["time"] - last
            last = r["time"]
        elif r["kind"] == "val":  # periodic ones (the whole file here), then the final one
            if not points or points[-1][0] != r["step"]:
                points.append((r["step"], trained, r["bpb"] if bpb else r["loss"]))
            last = None  # the next step's time starts after the validation
        elif r["kind"] in ("start", "resume"):
            last = r["time"]
    return points

base = [] if speed_only else curve("baseline")
if base:
    L0, W0 = base[-1][2], base[-1][1]
    unit = "bits/byte" if bpb else "nats/token"
    print(f"baseline: L0 = {L0:.4f} {unit} at step {base[-1][0]}, W0 = {W0:.1f} s of training")
    print(f"{'row':12} {'steps to L0':>11} {'s to L0':>8} {'share of W0':>11} {'val at W0':>10} {'vs L0':>8} {'s/step':>7} {'tokens/s':>8}")
    base_step = base[-1][1] / base[-1][0]
for name in names if base else []:
    pts = curve(name)
    reach = next(((s, t) for s, t, l in pts if l <= L0), None)
    at_w0 = [l for s, t, l in pts if t <= W0 * 1.0001]
    per_step = pts[-1][1] / pts[-1][0]
    steps = f"{reach[0]}" if reach else "-"
    secs = f"{reach[1]:.1f}" if reach else "-"
    share = f"{reach[1] / W0:.0%}" if reach else "-"
    val = f"{at_w0[-1]:10.4f} {at_w0[-1] - L0:+8.4f}" if at_w0 else f"{'-':>10} {'-':>8}"
    print(f"{name:12} {steps:>11} {secs:>8} {share:>11} {val} {per_step:7.3f} {base_step / per_step:7.2f}x")
if rounds:
    def step_time(name, r):
        rows = [json.loads(l) for l in open(f"{out}/speed-{r}-{name}/metrics.jsonl")]
        t = [x["time"] for x in rows if x["kind"] == "train"]
        return statistics.median(b - a for a, b in zip(t[9:], t[10:]))
    print(f"speed, alternated: {rounds} rounds, median s/step of steps 11 onwards; tokens/s against the baseline's "
          "in the same round")
    times = {n: [step_time(n, r) for r in range(1, rounds + 1)] for n in names}
    for name in names:
        ratios = [b / t for b, t in zip(times["baseline"], times[name])]
        print(f"{name:12} s/step {' '.join(f'{t:.3f}' for t in times[name])}   tokens/s "
              f"{' '.join(f'{x:.2f}x' for x in ratios)}   median {statistics.median(ratios):.2f}x")
PY
