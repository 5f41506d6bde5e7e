#!/usr/bin/env bash
# Byte pieces and GGUF types, measured (a benchmark, not a test). The figures: docs/BENCHMARKS.md "Byte pieces:
# bits per byte" and "GGUF in llama.cpp"; what they mean: docs/llama-cpp.md.
# 1. configs/kjv-small.yaml and configs/ko-faq.yaml trained with tokenizer.byte_fallback true and false, seeds
#    1337 and 7: the final validation bits per byte, and the same on the text both vocabularies spell with
#    ordinary pieces (scripts/bits_per_byte.py).
# 2. The byte-fallback models (seed 1337) exported as GGUF f32, f16 and q8_0: file size, llama.cpp's largest
#    probability gap to lmtrain over a sentence's top 10 (scripts/check_gguf.mjs), and llama.cpp's loss over
#    64 evenly spread validation windows (KJV; all 32 of the Korean FAQ), beside the erf forward of
#    scripts/check_hf_export.py over the same windows (scripts/bits_per_byte.py --loss).
# Usage: scripts/bench_gguf.sh   (about 20 minutes on 2 cores; runs in $BENCH_OUT, default build/bench-gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh lmtrain >/dev/null
out=${BENCH_OUT:-build/bench-gguf}
mkdir -p "$out"
[ -f data/kjv/val.txt ] || bash scripts/get_corpus.sh kjv
[ -f data/debian-faq-ko/val.txt ] || bash scripts/get_corpus.sh debian-faq-ko
lm=build/lmtrain
py=/usr/bin/python3
declare -A text=([kjv]="And God said, Let there be light: and there was light." [ko]="데비안은 자유 소프트웨어입니다.")
declare -A config=([kjv]=configs/kjv-small.yaml [ko]=configs/ko-faq.yaml)
echo "| corpus | byte_fallback | seed | bits/byte, all | bits/byte, shared text | unk/byte targets |"
for corpus in kjv ko; do
  for seed in 1337 7; do
    for bf in true false; do
      run=$out/$corpus-$bf-$seed
      $lm train -c "${config[$corpus]}" --set run.dir="$run" --set run.seed=$seed --set tokenizer.byte_fallback=$bf \
        --overwrite > "$run.log" 2>&1
      $lm export --checkpoint "$run" --out "$run-hf" > /dev/null
      $lm export --checkpoint "$run" --format gguf --out "$run.gguf" > /dev/null 2>&1
      read -r _ all _ shared rest <<< "$($py scripts/bits_per_byte.py "$run-hf" "$run/val.bin" "$run.gguf")"
      echo "| $corpus | $bf | $seed | $all | $shared | ${rest//[^0-9]/} |"
    done
  done
done
echo
echo "| corpus | type | bytes | max prob gap | llama.cpp loss | erf forward loss | windows |"
for corpus in kjv ko; do
  run=$out/$corpus-true-1337
  windows=$([ $corpus = kjv ] && echo 64 || echo 32)
  $lm inspect probs --checkpoint "$run" --text "${text[$corpus]}" --json -k 10 > "$run.probs.json"
  ref=$($py scripts/bits_per_byte.py --loss "$run-hf" "$run/val.bin" "$windows")
  for type in f32 f16 q8_0; do
    $lm export --checkpoint "$run" --format gguf --type $type --out "$run.$type.gguf" > /dev/null 2>&1
    check=$(node scripts/check_gguf.mjs --model "$run.$type.gguf" --probs "$run.probs.json" --tolerance 1 \
              --text "${text[$corpus]}" --loss "$run/val.bin" --windows "$windows")
    grep -E "^(tokenize|FAIL)" <<< "$check" >&2
    gap=$(sed -n 's/.*p_lmtrain| = \([^ ]*\).*/\1/p' <<< "$check")
    loss=$(sed -n 's/^loss: \([^ ]*\).*/\1/p' <<< "$check")
    echo "| $corpus | $type | $(stat -c %s "$run.$type.gguf") | $gap | $loss | $ref | $windows |"
  done
done
