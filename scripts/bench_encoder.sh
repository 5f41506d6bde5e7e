#!/usr/bin/env bash
# Sentence vectors from a contrastive fine-tune (finetune.objective contrastive), measured against the same
# model before it, in one invocation; the table goes to runs/bench-encoder.md (docs/BENCHMARKS.md "Sentence
# vectors from a contrastive fine-tune").
# KJV: the quickstart model (runs/kjv-small) fine-tuned with configs/encoder-kjv.yaml (next_line positives of
#   the training text), lm_weight 0 and 0.5; scored on half-verse retrieval of 1,000 validation verses
#   (scripts/bench_embed.sh: a task it was not trained on, on lines it never saw) and on its held-out next-line
#   pairs; forgetting is the KJV validation loss before and after.
# Korean FAQ: runs/ko-faq fine-tuned with configs/encoder-ko-faq.yaml on question -> answer pairs; every fourth
#   pair (in FAQ order) is held out in data/debian-faq-ko/qa-val.tsv, the rest in qa-train.tsv; scored on the
#   held-out questions finding their answers among the held-out answers.
# A ceiling column: the same fine-tune trained on the half-verse task itself for 1,000 steps (each training verse
#   of 8 or more words split in two, as the scored ones are; validation on the later validation verses, never
#   the 1,000 scored): what this model reaches when it is trained for the task, which the next_line encoder is not.
# A lexical reference row: TF-IDF cosine of the same half-verses (words, idf over the 2,000 halves).
# --grid: the KJV settings behind configs/encoder-kjv.yaml instead (next_line positives, each a fine-tune of the
#   quickstart model scored on the same 1,000 half-verses with the encoder's own pooling); the table goes to
#   runs/bench-encoder-grid.md.
# Usage: scripts/bench_encoder.sh [--summary | --grid]   (makes runs/kjv-small and runs/ko-faq first when
#   missing; --summary prints the table again from the runs already made)
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/encoder
if [ "${1:-}" != "--summary" ]; then
bash scripts/setup.sh lmtrain >/dev/null
LM=build/lmtrain
for c in kjv debian-faq-ko; do [ -s "data/$c/val.txt" ] || bash scripts/get_corpus.sh "$c"; done
mkdir -p "$out"
[ -f runs/kjv-small/latest ] || $LM train -c configs/kjv-small.yaml > "$out/kjv-small.log" 2>&1

# ft NAME FROM CONFIG [overrides...]: one fine-tune into runs/encoder/NAME, its wall seconds beside it
ft() {
  local name=$1 from=$2 cfg=$3 start end
  shift 3
  start=$(date +%s.%N)
  $LM finetune --from "$from" -c "$cfg" --overwrite --set run.dir="$out/$name" "$@" > "$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log"; return 1; }
  end=$(date +%s.%N)
  python3 -c "print($end - $start)" > "$out/$name/wall_seconds"
}

if [ "${1:-}" = "--grid" ]; then
  [ -s "$out/hv-kjv-small/queries.txt" ] || BENCH_OUT="$out/hv-kjv-small" bash scripts/bench_embed.sh > "$out/hv-kjv-small.md"
  settings=(
    "lr 0.002, table trained|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false"
    "lr 0.002, table trained, 100 steps|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false --set train.max_steps=100"
    "lr 0.002, table trained, batch 256, 100 steps|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false --set train.batch_size=256 --set train.max_steps=100"
    "lr 0.002, table trained, temperature 0.2|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false --set finetune.temperature=0.2"
    "lr 0.002, table trained, pool last|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false --set finetune.pool=last"
    "lr 0.002, table trained, pool weighted|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false --set finetune.pool=weighted"
    "lr 0.002, blocks frozen (the table alone trains)|--set train.lr=0.002 --set train.min_lr=0.0002 --set finetune.freeze_embeddings=false --set finetune.freeze=[blocks]"
    "lr 0.0001, table trained|--set train.lr=0.0001 --set train.min_lr=0.00001 --set finetune.freeze_embeddings=false"
    "lr 0.001, table and blocks 0-2 frozen|--set train.lr=0.001 --set train.min_lr=0.0001 --set finetune.freeze=[blocks.0,blocks.1,blocks.2]"
    "lr 0.0005, table frozen (configs/encoder-kjv.yaml)|"
    "lr 0.0005, table frozen, lm_weight 1|--set finetune.lm_weight=1")
  {
    echo "KJV encoder settings (next_line positives, 300 steps and batch 64 unless said): half-verse retrieval of the"
    echo "same 1,000 validation verses with the encoder's own pooling; the language model before the fine-tune"
    grep '^| mean, layer 0 |' "$out/hv-kjv-small.md" | awk -F'|' '{ gsub(/ /, "", $3); printf "scores %s top-1 with the mean of layer 0 (its input vectors)\n", $3 }'
    echo "| setting | half-verse top-1 | top-10 | held-out next-line top-1 | KJV val loss after | wall s |"
    echo "|---|---|---|---|---|---|"
    i=0
    for row in "${settings[@]}"; do
      read -r -a flags <<< "${row#*|}"
      ft "grid-$i" runs/kjv-small configs/encoder-kjv.yaml "${flags[@]}"
      for side in queries documents; do
        $LM embed --checkpoint "$out/grid-$i" --file "$out/hv-kjv-small/$side.txt" --out "$out/grid-$i/$side.npy" > /dev/null 2>&1
      done
      /usr/bin/python3 scripts/retrieval_score.py "$out/grid-$i/queries.npy" "$out/grid-$i/documents.npy" --label x |
        /usr/bin/python3 -c '
import json, sys
f = dict(kv.split("=") for kv in sys.stdin.read().split("\t")[1:])
sv, fg = (json.load(open(sys.argv[1] + "/" + n)) for n in ("sentence_vectors.json", "forgetting.json"))
print("| %s | %.3f | %.3f | %.4f | %.4f | %.0f |" % (sys.argv[2], float(f["top1"]), float(f["top10"]), sv["after"]["top1"],
      fg["original"]["after"], float(open(sys.argv[1] + "/wall_seconds").read())))' "$out/grid-$i" "${row%%|*}"
      i=$((i + 1))
    done
  } | tee runs/bench-encoder-grid.md
  exit 0
fi

[ -f runs/ko-faq/latest ] || $LM train -c configs/ko-faq.yaml > "$out/ko-faq.log" 2>&1

# the FAQ's numbered questions ("1.1. ...?") with the paragraph after each (unless that is a heading too)
cat data/debian-faq-ko/train.txt data/debian-faq-ko/val.txt | awk -v t=data/debian-faq-ko/qa-train.tsv \
    -v v=data/debian-faq-ko/qa-val.tsv '
  prev != "" && $0 !~ /^[0-9]+(\.[0-9]+)+\. / && !(prev in seen) {
    seen[prev] = 1; n++; q = prev; a = $0; gsub(/\t/, " ", q); gsub(/\t/, " ", a)
    print q "\t" a > ((n % 4 == 0) ? v : t) }
  { prev = ($0 ~ /^[0-9]+(\.[0-9]+)+\. .*\?$/) ? $0 : "" }'

# half-verse pairs for the ceiling column: every training verse; validation verses after the 1,000 scored ones
halves='{ h = int(NF / 2); a = $1; for (i = 2; i <= h; i++) a = a " " $i
          b = $(h + 1); for (i = h + 2; i <= NF; i++) b = b " " $i; print a "\t" b }'
awk "NF >= 8 $halves" data/kjv/train.txt > "$out/halves-train.tsv"
awk "NF >= 8 && ++count > 1000 $halves" data/kjv/val.txt > "$out/halves-val.tsv"

ft kjv-0 runs/kjv-small configs/encoder-kjv.yaml
ft kjv-05 runs/kjv-small configs/encoder-kjv.yaml --set finetune.lm_weight=0.5
ft kjv-task runs/kjv-small configs/encoder-kjv.yaml --set finetune.positives=none --set train.max_steps=1000 \
  --set finetune.pairs="$out/halves-train.tsv" --set finetune.val_pairs="$out/halves-val.tsv"
ft ko-0 runs/ko-faq configs/encoder-ko-faq.yaml
ft ko-05 runs/ko-faq configs/encoder-ko-faq.yaml --set finetune.lm_weight=0.5
for c in runs/kjv-small "$out/kjv-0" "$out/kjv-05" "$out/kjv-task"; do
  name=$(basename "$c")
  BENCH_OUT="$out/hv-$name" bash scripts/bench_embed.sh --checkpoint "$c" > "$out/hv-$name.md"
done

fi

python3 - "$out" <<'PY' | tee runs/bench-encoder.md
import json, math, re, subprocess, sys
out = sys.argv[1]
cpu = subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True, capture_output=True, text=True).stdout.strip()
flags = sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16|amx_tile|avx512f|avx2)\b", open("/proc/cpuinfo").read())))
print(f"CPU: {cpu}, {subprocess.run('nproc', capture_output=True, text=True).stdout.strip()} cores; flags: {' '.join(flags)}")
def rows(md):  # bench_embed.sh's table: {vectors: (top1, top10, mrr)}
    r = {}
    for line in open(md):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 4 and re.match(r"^[0-9.]+$", c[1]):
            r[c[0]] = tuple(float(x) for x in c[1:])
    return r
def sv(name): return json.load(open(f"{out}/{name}/sentence_vectors.json"))
def fg(name): return json.load(open(f"{out}/{name}/forgetting.json"))
def wall(name): return float(open(f"{out}/{name}/wall_seconds").read())
def steps(name): return int(re.search(r"after (\d+) steps", open(f"{out}/{name}.log").read()).group(1))
base = rows(f"{out}/hv-kjv-small.md")
best = max((v for k, v in base.items() if k != "chance"), key=lambda v: v[0])
best_name = [k for k, v in base.items() if v == best][0]
e0, e5 = rows(f"{out}/hv-kjv-0.md")["mean"], rows(f"{out}/hv-kjv-05.md")["mean"]
et = rows(f"{out}/hv-kjv-task.md")["mean"]
cell = lambda v, i: f"{v[i]:.3f} ({v[i] / max(best[i], 1e-9):.1f}x)"
print("\nKJV: half-verse retrieval, 1,000 validation verses (first half finds its second half among all 1,000)")
print("| | language model (best pooling: %s) | encoder, lm_weight 0 | encoder, lm_weight 0.5 | ceiling: trained on training verses' halves, %s steps |" % (best_name, f"{steps('kjv-task'):,}"))
print("|---|---|---|---|---|")
for i, m in enumerate(("top-1", "top-10", "MRR")):
    print(f"| half-verse {m} | {best[i]:.3f} | {cell(e0, i)} | {cell(e5, i)} | {cell(et, i)} |")
s0, s5 = sv("kjv-0"), sv("kjv-05")
print(f"| held-out next-line pairs, top-1 among {s0['pairs']} (mean pooling) | {s0['before']['top1']:.4f} | {s0['after']['top1']:.4f} | {s5['after']['top1']:.4f} | |")
f0, f5, ft_ = fg("kjv-0"), fg("kjv-05"), fg("kjv-task")
print(f"| KJV validation loss, nats/token (forgetting) | {f0['original']['before']:.4f} | {f0['original']['after']:.4f} | {f5['original']['after']:.4f} | {ft_['original']['after']:.4f} |")
print(f"| fine-tune: steps, wall seconds (reports included) | | {steps('kjv-0')}, {wall('kjv-0'):.0f} s | {steps('kjv-05')}, {wall('kjv-05'):.0f} s | {steps('kjv-task')}, {wall('kjv-task'):.0f} s |")
q = [l.rstrip("\n") for l in open(f"{out}/hv-kjv-small/queries.txt")]
d = [l.rstrip("\n") for l in open(f"{out}/hv-kjv-small/documents.txt")]
words = lambda t: re.findall(r"[a-z]+", t.lower())
df = {}
for t in q + d:
    for w in set(words(t)): df[w] = df.get(w, 0) + 1
def tfidf(t):
    v = {}
    for w in words(t): v[w] = v.get(w, 0) + math.log(len(q + d) / df[w])
    n = math.sqrt(sum(x * x for x in v.values())) or 1.0
    return {w: x / n for w, x in v.items()}
Q, D = [tfidf(t) for t in q], [tfidf(t) for t in d]
cos = lambda a, b: sum(x * b.get(w, 0.0) for w, x in a.items())
ranks = []
for i, a in enumerate(Q):
    right = cos(a, D[i])
    ranks.append(sum(1 for b in D if cos(a, b) >= right))
print(f"| reference: TF-IDF of the words (no model) | {sum(r <= 1 for r in ranks) / len(ranks):.3f} top-1, {sum(r <= 10 for r in ranks) / len(ranks):.3f} top-10 | | | |")
print(f"| chance (half-verse top-1) | {base['chance'][0]:.3f} | | | |")
k0, k5 = sv("ko-0"), sv("ko-05")
print(f"\nKorean FAQ: {k0['pairs']} held-out questions find their answers among the {k0['pairs']} held-out answers (trained on the other pairs)")
print("| | language model (mean pooling) | encoder, lm_weight 0 | encoder, lm_weight 0.5 |")
print("|---|---|---|---|")
for key, m in (("top1", "top-1"), ("top10", "top-10"), ("mrr", "MRR")):
    b = k0["before"][key]
    print(f"| {m} | {b:.3f} | {k0['after'][key]:.3f} ({k0['after'][key] / max(b, 1e-9):.1f}x) | {k5['after'][key]:.3f} ({k5['after'][key] / max(b, 1e-9):.1f}x) |")
g0, g5 = fg("ko-0"), fg("ko-05")
print(f"| FAQ validation loss, nats/token (forgetting) | {g0['original']['before']:.4f} | {g0['original']['after']:.4f} | {g5['original']['after']:.4f} |")
print(f"| mean cosine, positive / random pairs | {k0['before']['mean_cosine_positive']:.3f} / {k0['before']['mean_cosine_random']:.3f} | {k0['after']['mean_cosine_positive']:.3f} / {k0['after']['mean_cosine_random']:.3f} | {k5['after']['mean_cosine_positive']:.3f} / {k5['after']['mean_cosine_random']:.3f} |")
print(f"| fine-tune: steps, wall seconds (reports included) | | {steps('ko-0')}, {wall('ko-0'):.0f} s | {steps('ko-05')}, {wall('ko-05'):.0f} s |")
print(f"| chance (top-1) | {k0['chance']['top1']:.3f} | | |")
PY
