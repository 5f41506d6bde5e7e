#!/usr/bin/env bash
# The main job on the default corpus: set-up (packages + build), KJV corpus, tokenizer, token files,
# training with configs/kjv-small.yaml, then the final validation loss, a sample, and the run's HTML report
# (runs/kjv-small/report.html: curves, embedding map, positions, next-token bars).
# Usage: scripts/quickstart.sh [extra --set overrides passed to `lmtrain train`]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup.sh lmtrain   # the tests are built by scripts/test.sh
[ -s data/kjv/train.txt ] && [ -s data/kjv/val.txt ] || bash scripts/get_corpus.sh kjv
LM=build/lmtrain
RUN=runs/kjv-small
mkdir -p runs
overrides=()
for o in "$@"; do overrides+=(--set "$o"); done
$LM train -c configs/kjv-small.yaml --overwrite "${overrides[@]}" 2>&1 | tee "$RUN.log"
echo
$LM sample --checkpoint "$RUN" --prompt "In the beginning God" --top-k 10 --generate 40 --temperature 0.8 --seed 1
echo
$LM report "$RUN" --prompt "And God said"
size=$(stat -c %s "$RUN/report.html")
if [ "$size" -ge $(( 3 * 1024 * 1024 )) ]; then
  echo "quickstart: $RUN/report.html is $size bytes, over the 3 MB a report may take" >&2
  exit 1
fi
echo
echo "report: $RUN/report.html (open it in any browser; it loads nothing from the network)"
echo "quickstart finished in $(( $(date +%s) - start ))s; run directory $RUN, log $RUN.log"
