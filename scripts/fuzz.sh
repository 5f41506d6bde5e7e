#!/usr/bin/env bash
# libFuzzer (clang, with ASan+UBSan) on the four readers of untrusted bytes, FUZZ_SECONDS (default 60) each:
#   fuzz_config       the config loader: YAML, then NUL-separated --set values
#   fuzz_token_file   the token-file reader: header, size, every id
#   fuzz_safetensors  the safetensors header and tensor reader
#   fuzz_checkpoint   manifest verification, the weight loader, arch.json and trainer_state.json
# Seeds are made here from a real tiny run plus tests/fuzz/regressions/<target>/. A crash is saved under
# build-sanitize/fuzz/crashes/<target>/ and fails the script; add it to tests/fuzz/regressions/<target>/
# with the fix (tests/fuzz/README.md). Prints executions, coverage and crashes per target.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS=(config token_file safetensors checkpoint)
export SETUP_WITH=clang BUILD_DIR=build-sanitize
export LMTRAIN_CMAKE_ARGS="-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLMTRAIN_SANITIZE=address,undefined -DLMTRAIN_FUZZ=ON"
bash scripts/setup.sh lmtrain "${TARGETS[@]/#/fuzz_}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

W=build-sanitize/fuzz
rm -rf "$W/seeds" "$W/crashes"
mkdir -p "$W/seeds" "$W/crashes"
# Seeds: a tokenizer, a token file and a 1-step checkpoint of the fuzz model's architecture (V 128, C 16,
# L 2, H 2, T 8), made by the sanitized lmtrain itself.
cat > "$W/seeds/run.yaml" <<YAML
run: {dir: $W/seeds/run, seed: 1}
data: {train: tests/data/tiny_en.txt, val: tests/data/tiny_en_val.txt}
tokenizer: {vocab_size: 128}
model: {d_model: 16, n_layers: 2, n_heads: 2, max_seq_len: 8}
train: {batch_size: 2, max_steps: 1, warmup_steps: 0, eval_every: 0}
YAML
build-sanitize/lmtrain train -c "$W/seeds/run.yaml" > "$W/seeds/run.log" 2>&1
CK="$W/seeds/run/step_00000001"
for t in "${TARGETS[@]}"; do mkdir -p "$W/corpus/$t" "$W/crashes/$t"; cp tests/fuzz/regressions/"$t"/* "$W/corpus/$t/"; done
cp configs/*.yaml "$W/corpus/config/"
printf 'train: {lr: 0.001}\0train.max_steps=5\0model.positions=sinusoidal' > "$W/corpus/config/with_set"
cp "$W/seeds/run/val.bin" "$W/corpus/token_file/val.bin"
cp "$CK/model.safetensors" "$W/corpus/safetensors/model.safetensors"
{ cat "$CK/manifest.json"; printf '\0'; cat "$CK/model.safetensors"; printf '\0'; cat "$CK/arch.json"; printf '\0';
  cat "$CK/trainer_state.json"; } > "$W/corpus/checkpoint/step_1"

status=0
summary=""
for t in "${TARGETS[@]}"; do
  echo "fuzz: $t for ${SECONDS_EACH}s"
  set +e
  max_len=65536  # a checkpoint or safetensors seed is a whole (tiny) weights file
  case "$t" in config | token_file) max_len=4096 ;; esac
  "build-sanitize/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$W/crashes/$t/" "$W/corpus/$t" > "$W/$t.log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$W/$t.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$W/$t.log" | tail -1 | grep -o '[0-9]*' || echo "?")
  crashes=$(find "$W/crashes/$t" -type f | wc -l)
  summary+=$(printf '%-12s %12s executions  %6s edges  %s crash(es)  rc %s' "$t" "$execs" "$cov" "$crashes" "$rc")$'\n'
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then status=1; tail -40 "$W/$t.log"; fi
done
printf '%s' "$summary"
[ "$status" -eq 0 ] && echo "fuzz: clean (no crash, leak, hang or sanitizer report)" || echo "fuzz: FAILED: see $W/crashes and $W/*.log"
exit "$status"
