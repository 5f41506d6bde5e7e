#!/usr/bin/env bash
# Streaming, parallel `lmtrain prepare` on a large corpus of many files (docs/training.md "Many files and large corpora").
# 1. The corpus: the KJV and the two Debian FAQs, their lines drawn at random with a fixed seed (so repeated
#    and shuffled by line) into FILES files, SIZE_MB in all (default ~2 GB over 1,000 files). Repetition
#    inflates nothing measured here: encoding throughput and memory depend on the bytes and lines read, not on
#    whether they are new; SentencePiece has no cache that a repeated line would hit.
# 2. A tokenizer (8192 BPE pieces, trained on the KJV training split).
# 3. `lmtrain prepare` with 1 and then 2 threads: MB/s and peak RSS (getrusage of the child), the output's
#    SHA-256 (every shard in order: the two must agree); `spm_encode --output_format=id` on the same text
#    (one process, as Debian's sentencepiece package ships it) for comparison.
# 4. Training from sharded token data: config kjv-small on the KJV as one token file and as 20 files in
#    shards of 100,000 tokens, STEPS steps each, tokens/s of both.
# Usage: scripts/bench_prepare.sh   (SIZE_MB=2048 FILES=1000 STEPS=200; BENCH_OUT=build/bench-prepare)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh lmtrain
[ -f data/kjv/train.txt ] || bash scripts/get_corpus.sh kjv
[ -f data/debian-faq/train.txt ] || bash scripts/get_corpus.sh debian-faq
[ -f data/debian-faq-ko/train.txt ] || bash scripts/get_corpus.sh debian-faq-ko
if ! command -v spm_encode > /dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends sentencepiece
fi
out=${BENCH_OUT:-build/bench-prepare}
size_mb=${SIZE_MB:-2048}
files=${FILES:-1000}
steps=${STEPS:-200}
mkdir -p "$out"
lmtrain=build/lmtrain

corpus=$out/corpus-${size_mb}mb-${files}
if [ ! -f "$corpus/.complete" ]; then
  rm -rf "$corpus"
  python3 - "$corpus" "$size_mb" "$files" <<'EOF'
import os, random, sys
out, size_mb, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = []
for src in ["data/kjv/train.txt", "data/kjv/val.txt", "data/debian-faq/train.txt", "data/debian-faq/val.txt",
            "data/debian-faq-ko/train.txt", "data/debian-faq-ko/val.txt"]:
    with open(src, "rb") as f:
        lines += [l for l in f.read().split(b"\n") if l.strip()]
rng = random.Random(1337)
per_file = size_mb * 1024 * 1024 // files
for i in range(files):
    d = os.path.join(out, "%02d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    chunk, n = [], 0
    while n < per_file:
        l = lines[rng.randrange(len(lines))]
        chunk.append(l)
        n += len(l) + 1
    with open(os.path.join(d, "part-%04d.txt" % i), "wb") as f:
        f.write(b"\n".join(chunk) + b"\n")
open(os.path.join(out, ".complete"), "w").close()
EOF
fi
bytes=$(find "$corpus" -type f -name '*.txt' -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
nfiles=$(find "$corpus" -type f -name '*.txt' | wc -l)
echo "corpus: $corpus, $nfiles files, $bytes bytes"

tok=$out/kjv8192.model
[ -f "$tok" ] || $lmtrain tokenizer train --input data/kjv/train.txt --model "$tok" --vocab-size 8192 \
  --character-coverage 1.0 > /dev/null

# run LABEL CMD...: wall seconds and peak RSS (MB) of CMD and its children, appended to $out/runs.txt
run() {
  local label=$1; shift
  python3 - "$label" "$@" <<'EOF' | tee -a "$out/runs.txt"
import resource, subprocess, sys, time
label, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
s = time.monotonic() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("%-28s %8.1f s  peak RSS %7.1f MB" % (label, s, rss))
EOF
}
: > "$out/runs.txt"
hash_of() { ls "$1"-*.bin | sort | xargs cat | sha256sum | cut -c1-16; }  # every shard of STEM, in order
stem1=$out/tokens-t1 stem2=$out/tokens-t2
run "lmtrain prepare, 1 thread" $lmtrain prepare --tokenizer "$tok" --input "$corpus" --output "$stem1.bin" --threads 1
run "lmtrain prepare, 2 threads" $lmtrain prepare --tokenizer "$tok" --input "$corpus" --output "$stem2.bin" --threads 2
run "spm_encode --output_format=id" sh -c "find '$corpus' -type f -name '*.txt' | sort | xargs cat | spm_encode --model '$tok' --output_format=id > /dev/null"
h1=$(hash_of "$stem1") h2=$(hash_of "$stem2")
shards=$(ls "$stem2"-*.bin | wc -l)
echo "output: $shards shards; sha256 of the shards in order: 1 thread $h1, 2 threads $h2 $([ "$h1" = "$h2" ] && echo identical || echo DIFFERENT)"
python3 - "$out/runs.txt" "$bytes" <<'EOF'
import re, sys
rows = [re.match(r"(.*?)\s+([\d.]+) s\s+peak RSS\s+([\d.]+) MB", l) for l in open(sys.argv[1])]
rows = [(m.group(1), float(m.group(2)), float(m.group(3))) for m in rows if m]
mb = int(sys.argv[2]) / 1e6
spm = [r for r in rows if r[0].startswith("spm_encode")][0][1]
print("\n%-30s %9s %9s %12s %10s" % ("", "seconds", "MB/s", "peak RSS MB", "vs spm"))
for name, s, rss in rows:
    print("%-30s %9.1f %9.2f %12.1f %9.2fx" % (name, s, mb / s, rss, spm / s))
EOF

# Training from shards: the KJV as one file against the same text as 20 files in shards of 100,000 tokens.
parts=$out/kjv-parts
if [ ! -f "$parts/.complete" ]; then
  rm -rf "$parts"; mkdir -p "$parts"
  split -n l/20 -d -a 2 --additional-suffix=.txt data/kjv/train.txt "$parts/kjv-"
  touch "$parts/.complete"
fi
train_run() {  # NAME DATA EXTRA...
  local name=$1 data=$2; shift 2
  rm -rf "$out/train-$name"
  $lmtrain train -c configs/kjv-small.yaml --set run.dir="$out/train-$name" --set data.train="$data" \
    --set data.val=data/kjv/val.txt --set train.max_steps="$steps" --set train.eval_every=0 \
    --set checkpoint.every=0 "$@" > "$out/train-$name.log" 2>&1
  python3 - "$out/train-$name/metrics.jsonl" "$name" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"train"' in l]
rates = [r["tokens_per_s"] for r in rows[len(rows) // 4:] if "tokens_per_s" in r]
print("train on %-20s mean tokens/s over the last 3/4 of the steps: %.0f" % (sys.argv[2], sum(rates) / len(rates)))
EOF
}
train_run one-file data/kjv/train.txt
train_run 20-files-shards "$parts" --set data.shard_tokens=100000
ls "$out/train-20-files-shards" | grep -c '^train-.*\.bin$' | sed 's/^/shards of the 20-file run: /'
