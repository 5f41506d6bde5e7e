#!/usr/bin/env bash
# New vocabulary for a new domain (finetune.new_pieces), measured. Trains the quickstart config with byte pieces
# (tokenizer.byte_fallback: true) into runs/np-base, then fine-tunes it on the Korean FAQ and on the English FAQ,
# each without new pieces and with N of them (pieces, normal init; the token table unfrozen or `old` frozen),
# and prints one table per corpus to runs/bench-new-pieces.md:
#   pieces per byte of the held-out text (old tokenizer vs extended), held-out bits per byte at equal wall time,
#   the new text's loss at the start (step 0), at the first evaluation (step 25) and at the end under pieces,
#   normal and mean init, and forgetting (KJV validation loss).
# Equal wall time: each extended run goes first; the run without new pieces then gets as many steps as fit in
# the extended run's time, measured from its own first run (the baseline gets any extra time).
# Usage: scripts/bench_new_pieces.sh [STEPS]   (default 300; NEW_PIECES_KO / NEW_PIECES_EN, default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-300}
NKO=${NEW_PIECES_KO:-2000}
NEN=${NEW_PIECES_EN:-2000}
bash scripts/setup.sh lmtrain >/dev/null
LM=build/lmtrain
for c in kjv debian-faq debian-faq-ko; do [ -s "data/$c/val.txt" ] || bash scripts/get_corpus.sh "$c"; done
mkdir -p runs/np
if [ ! -f runs/np-base/latest ]; then
  $LM train -c configs/kjv-small.yaml --overwrite --set run.dir=runs/np-base --set tokenizer.byte_fallback=true \
    2>&1 | tee runs/np/base.log | grep -E "final validation|tokenizer:" || true
fi
{
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; flags: $(grep -o -w -E 'avx512_bf16|amx_bf16|amx_tile|avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "base: configs/kjv-small.yaml with tokenizer.byte_fallback: true ($(grep -o 'final validation loss [0-9.]*' runs/np/base.log 2>/dev/null | head -1 || echo 'trained before'))"
} | tee runs/np/header.txt

# ft NAME CORPUS STEPS [overrides...]: one fine-tune, its wall seconds in runs/np/NAME/wall_seconds
ft() {
  local name=$1 corpus=$2 steps=$3
  shift 3
  local start end
  start=$(date +%s.%N)
  $LM finetune --from runs/np-base --overwrite --set run.dir="runs/np/$name" --set run.seed=1337 \
    --set data.train="data/$corpus/train.txt" --set data.val="data/$corpus/val.txt" \
    --set train.batch_size=16 --set train.max_steps="$steps" --set train.lr=0.001 --set train.min_lr=0.0001 \
    --set train.warmup_steps=20 --set train.eval_every=25 --set train.log_every=50 \
    --set finetune.original_val=data/kjv/val.txt "$@" > "runs/np/$name.log" 2>&1 || { tail -20 "runs/np/$name.log"; return 1; }
  end=$(date +%s.%N)
  python3 -c "print($end - $start)" > "runs/np/$name/wall_seconds"
  grep -E "final validation" "runs/np/$name.log" | sed "s/^/$name: /"
}

# the largest count the text allows when N is more than it can give
pieces_for() {  # pieces_for CORPUS N
  local n=$2 out
  if out=$($LM finetune --from runs/np-base --overwrite --set run.dir=runs/np/probe-$1 --set data.train="data/$1/train.txt" \
             --set data.val="data/$1/val.txt" --set train.max_steps=1 --set train.warmup_steps=0 --set train.eval_every=0 \
             --set finetune.original_val=data/kjv/val.txt --new-pieces "$n" 2>&1); then
    echo "$n"
  else
    echo "$out" | sed -n 's/.*expected at most \([0-9]*\).*/\1/p' | head -1
  fi
}

for corpus in debian-faq-ko debian-faq; do
  n=$([ "$corpus" = debian-faq-ko ] && echo "$NKO" || echo "$NEN")
  n=$(pieces_for "$corpus" "$n")
  [ -n "$n" ] || { echo "no new pieces for $corpus"; exit 1; }
  ft "$corpus-ext" "$corpus" "$STEPS" --new-pieces "$n"
  ft "$corpus-ext-normal" "$corpus" "$STEPS" --new-pieces "$n" --set finetune.new_rows_init=normal
  ft "$corpus-ext-mean" "$corpus" "$STEPS" --new-pieces "$n" --set finetune.new_rows_init=mean
  ft "$corpus-ext-old" "$corpus" "$STEPS" --new-pieces "$n" --set finetune.freeze_embeddings=old
  ft "$corpus-none" "$corpus" "$STEPS"
  # equal wall time: the run without new pieces gets the extended run's seconds at its own pace
  eq=$(python3 -c "
t_ext=float(open('runs/np/$corpus-ext/wall_seconds').read()); t0=float(open('runs/np/$corpus-none/wall_seconds').read())
print(max($STEPS, round($STEPS * t_ext / t0)))")
  if [ "$eq" != "$STEPS" ]; then ft "$corpus-none-eq" "$corpus" "$eq"; fi
  $LM tokenizer stats --corpus "data/$corpus/val.txt" --model runs/np-base/tokenizer.model \
    --model "runs/np/$corpus-ext/tokenizer.model" > "runs/np/$corpus-stats.txt"
  echo "$n" > "runs/np/$corpus-n"
done

python3 - "$STEPS" <<'PY' | tee runs/bench-new-pieces.md
import json, os, re, sys
steps = int(sys.argv[1])
print(open("runs/np/header.txt").read().strip())
def final(name):
    m = re.search(r"final validation loss ([0-9.]+) nats/token, ([0-9.]+) bits/byte after (\d+) steps", open(f"runs/np/{name}.log").read())
    return float(m.group(1)), float(m.group(2)), int(m.group(3))
def forget(name):
    return json.load(open(f"runs/np/{name}/forgetting.json"))
def first_eval(name):
    for line in open(f"runs/np/{name}/metrics.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "val":
            return r["step"], r["loss"]
def wall(name):
    return float(open(f"runs/np/{name}/wall_seconds").read())
for corpus, label in (("debian-faq-ko", "KJV -> Korean FAQ"), ("debian-faq", "KJV -> English Debian FAQ")):
    n = open(f"runs/np/{corpus}-n").read().strip()
    stats = open(f"runs/np/{corpus}-stats.txt").read().splitlines()
    per_byte = [float(l.split()[3]) for l in stats[2:4]]
    changed = stats[3].split()[5]
    none = f"{corpus}-none-eq" if os.path.isdir(f"runs/np/{corpus}-none-eq") else f"{corpus}-none"
    ext, normal, old = f"{corpus}-ext", f"{corpus}-ext-normal", f"{corpus}-ext-old"
    print(f"\n{label}: {n} new pieces; {steps} steps of 16 x 128 tokens with them, the run without as many as fit in the same time")
    print("| | without new pieces | with new pieces | ratio |")
    print("|---|---|---|---|")
    print(f"| pieces per byte of held-out text (val.txt) | {per_byte[0]:.4f} | {per_byte[1]:.4f} | {per_byte[1]/per_byte[0]:.3f}x |")
    print(f"| held-out lines whose ids change | | {changed} | |")
    b0, b1 = final(none), final(ext)
    print(f"| held-out bits per byte ({b0[2]} vs {b1[2]} steps; {wall(none):.0f} s vs {wall(ext):.0f} s) | {b0[1]:.4f} | {b1[1]:.4f} | {b1[1]/b0[1]:.3f}x |")
    fp, fn, fm = forget(ext), forget(normal), forget(f"{corpus}-ext-mean")
    print(f"| new text at step 0, nats/token: pieces vs normal init (mean init: {fm['new']['before']:.4f}) | normal {fn['new']['before']:.4f} | pieces {fp['new']['before']:.4f} | {fp['new']['before'] - fn['new']['before']:+.4f} nats |")
    (s, lp), (_, ln), (_, lm) = first_eval(ext), first_eval(normal), first_eval(f"{corpus}-ext-mean")
    print(f"| new text at the first evaluation (step {s}), nats/token: pieces vs normal init (mean: {lm:.4f}) | normal {ln:.4f} | pieces {lp:.4f} | {lp - ln:+.4f} nats |")
    print(f"| held-out bits per byte after {steps} steps: pieces vs normal init (mean: {final(f'{corpus}-ext-mean')[1]:.4f}) | normal {final(normal)[1]:.4f} | pieces {b1[1]:.4f} | {b1[1]/final(normal)[1]:.3f}x |")
    fo, f_none = forget(old), forget(none)
    print(f"| KJV val loss after (forgetting), nats/token: unfrozen vs freeze_embeddings old (before: {fp['original']['before']:.4f}) | unfrozen {fp['original']['after']:.4f} | old {fo['original']['after']:.4f} | {fo['original']['after'] - fp['original']['after']:+.4f} nats |")
    print(f"| KJV val loss after, without new pieces | {f_none['original']['after']:.4f} | | |")
    print(f"| held-out bits per byte with freeze_embeddings old | | {final(old)[1]:.4f} | |")
PY
