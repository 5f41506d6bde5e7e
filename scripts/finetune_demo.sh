#!/usr/bin/env bash
# Fine-tunes the quickstart KJV checkpoint on the English Debian FAQ three ways (frozen token table,
# unfrozen, unfrozen at 0.1x lr), writes the comparison table to runs/finetune-demo.md and into README.md (between its
# finetune-demo markers), and the HTML reports of the frozen and unfrozen runs, drift measured with
# --compare against the quickstart checkpoint. Runs the quickstart first when its checkpoint is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh lmtrain
[ -s data/kjv/val.txt ] || bash scripts/get_corpus.sh kjv
[ -s data/debian-faq/train.txt ] || bash scripts/get_corpus.sh debian-faq
[ -f runs/kjv-small/latest ] || bash scripts/quickstart.sh
LM=build/lmtrain
run() {  # run NAME CONFIG [overrides...]
  local name=$1 cfg=$2
  shift 2
  local start end
  start=$(date +%s)
  $LM finetune --from runs/kjv-small --config "$cfg" --overwrite --set run.dir="runs/$name" "$@" 2>&1 | tee "runs/$name.log"
  end=$(date +%s)
  echo $(( end - start )) > "runs/$name/wall_seconds"
}
run faq-frozen configs/finetune-faq-frozen.yaml
run faq-unfrozen configs/finetune-faq-unfrozen.yaml
run faq-unfrozen-lr0.1 configs/finetune-faq-unfrozen.yaml --set finetune.embedding_lr_scale=0.1

python3 - <<'PY'
import json
rows = [("frozen token table (tied head frozen too)", "faq-frozen"),
        ("unfrozen", "faq-unfrozen"),
        ("unfrozen, embeddings at 0.1x lr", "faq-unfrozen-lr0.1")]
f0 = json.load(open("runs/faq-frozen/forgetting.json"))
lines = ["Made by `scripts/finetune_demo.sh` (150 steps of 16 x 128 tokens on the Debian FAQ, from the quickstart checkpoint).",
         "Before fine-tuning: FAQ val loss %.3f, KJV val loss %.3f (nats/token)." % (f0["new"]["before"], f0["original"]["before"]),
         "",
         "| run | FAQ val loss (new) | KJV val loss (old) | embedding drift mean L2 | p95 L2 | top 5 moved pieces (count in FAQ train) | wall time |",
         "|---|---|---|---|---|---|---|"]
for label, d in rows:
    f = json.load(open(f"runs/{d}/forgetting.json"))
    dr = json.load(open(f"runs/{d}/drift.json"))[0]
    top = ", ".join("`%s` (%d)" % (m["piece"], m["count"]) for m in dr["top"][:5]) if dr["l2"]["max"] > 0 else "none (frozen)"
    wall = open(f"runs/{d}/wall_seconds").read().strip()
    lines.append("| %s | %.3f | %.3f | %.4f | %.4f | %s | %s s |" % (label, f["new"]["after"], f["original"]["after"],
                 dr["l2"]["mean"], dr["l2"]["p95"], top, wall))
table = "\n".join(lines) + "\n"
open("runs/finetune-demo.md", "w").write(table)
readme = open("README.md").read()
start, end = "<!-- finetune-demo:start -->\n", "<!-- finetune-demo:end -->"
if start in readme and end in readme:
    head, rest = readme.split(start, 1)
    open("README.md", "w").write(head + start + table + end + rest.split(end, 1)[1])
print(table)
PY
echo "table written to runs/finetune-demo.md and README.md"
for d in faq-frozen faq-unfrozen; do
  $LM report "runs/$d" --compare runs/kjv-small --prompt "How do I install"
done
