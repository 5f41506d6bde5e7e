#!/usr/bin/env bash
# What a checkpoint's sentence vectors are worth (a benchmark, not a test). The command: docs/inspect.md
# "`lmtrain embed`: sentence vectors, and what they are worth"; the figures: docs/BENCHMARKS.md
# "Sentence vectors: the half-verse retrieval check".
# kjv (default): the first N validation verses of data/kjv/val.txt with at least 8 words. Each verse's first
#   half (by words) is a query and its second half the document; the right document must be found among all N.
# ko: the Korean Debian FAQ's questions ("1.1. ...?" lines) against the paragraph that follows each, taken from
#   the FAQ's train and val text together (the model has read the answers: this is a ceiling, not a held-out
#   figure).
# Rows: `lmtrain embed` with each pooling (mean, weighted, last) of the final hidden states, mean pooling after
# each block, and --from-input (the mean of the raw token rows: no context). Each gives top-1 and top-10
# accuracy and the mean reciprocal rank (scripts/retrieval_score.py), with chance on the last row.
# Usage: scripts/bench_embed.sh [--corpus kjv|ko] [--checkpoint CKPT] [--n N]
#   (default checkpoint: runs/kjv-small for kjv, made by scripts/quickstart.sh; runs/ko-faq for ko, made by
#   `lmtrain train -c configs/ko-faq.yaml`)
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=kjv
ckpt=""
n=1000
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) corpus=$2; shift 2 ;;
    --checkpoint) ckpt=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bash scripts/setup.sh lmtrain >/dev/null
out=${BENCH_OUT:-build/bench-embed-$corpus}
mkdir -p "$out"
rm -f "$out"/queries.txt "$out"/documents.txt "$out"/*.npy "$out"/*.log
case "$corpus" in
  kjv)
    ckpt=${ckpt:-runs/kjv-small}
    [ -f data/kjv/val.txt ] || bash scripts/get_corpus.sh kjv
    awk -v n="$n" -v q="$out/queries.txt" -v d="$out/documents.txt" 'NF >= 8 && count < n {
        h = int(NF / 2); a = $1; for (i = 2; i <= h; i++) a = a " " $i
        b = $(h + 1); for (i = h + 2; i <= NF; i++) b = b " " $i
        print a > q; print b > d; count++ }' data/kjv/val.txt
    what="the first $n KJV validation verses of 8 or more words: first half (query) against second half (document)"
    ;;
  ko)
    ckpt=${ckpt:-runs/ko-faq}
    [ -f data/debian-faq-ko/train.txt ] || bash scripts/get_corpus.sh debian-faq-ko
    # a question is a numbered heading ending in "?"; its document is the next line, unless that is a heading too
    cat data/debian-faq-ko/train.txt data/debian-faq-ko/val.txt | awk -v q="$out/queries.txt" -v d="$out/documents.txt" '
        prev != "" && $0 !~ /^[0-9]+(\.[0-9]+)+\. / && !(prev in seen) { seen[prev] = 1; print prev > q; print $0 > d }
        { prev = ($0 ~ /^[0-9]+(\.[0-9]+)+\. .*\?$/) ? $0 : "" }'
    what="the Korean Debian FAQ's numbered questions against the paragraph after each"
    ;;
  *) echo "--corpus: expected kjv or ko, got $corpus" >&2; exit 2 ;;
esac
if [ ! -e "$ckpt" ]; then
  echo "no checkpoint at $ckpt: run scripts/quickstart.sh (kjv) or lmtrain train -c configs/ko-faq.yaml (ko) first, or give --checkpoint" >&2
  exit 2
fi
pairs=$(wc -l < "$out/queries.txt")
dir=$ckpt
[ -f "$ckpt/latest" ] && dir=$ckpt/$(head -n 1 "$ckpt/latest")
layers=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["n_layers"])' "$dir/arch.json")
echo "checkpoint $ckpt; $what: $pairs pairs"
rows=("mean|--pool mean" "weighted|--pool weighted" "last|--pool last")
for ((l = 0; l < layers; l++)); do rows+=("mean, layer $l|--pool mean --layer $l"); done
rows+=("from-input|--from-input")
printf '| vectors | top-1 | top-10 | MRR |\n|---|---|---|---|\n'
i=0
for row in "${rows[@]}"; do
  name=${row%%|*}
  read -r -a flags <<< "${row#*|}"
  for side in queries documents; do
    build/lmtrain embed --checkpoint "$ckpt" --file "$out/$side.txt" "${flags[@]}" --out "$out/$i.$side.npy" \
      > "$out/$i.$side.log" 2>&1 || { cat "$out/$i.$side.log" >&2; exit 1; }
  done
  line=$(/usr/bin/python3 scripts/retrieval_score.py "$out/$i.queries.npy" "$out/$i.documents.npy" --label "$name")
  echo "$line" | awk -F'\t' '{ split($3, a, "="); split($4, b, "="); split($5, c, "=");
    printf "| %s | %.3f | %.3f | %.3f |\n", $1, a[2], b[2], c[2] }'
  last=$line
  i=$((i + 1))
done
echo "$last" | awk -F'\t' '{ split($6, a, "="); split($7, b, "="); split($8, c, "=");
  printf "| chance | %.3f | %.3f | %.3f |\n", a[2], b[2], c[2] }'
