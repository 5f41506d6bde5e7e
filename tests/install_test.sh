#!/usr/bin/env bash
# The installed lmtrain, away from its build tree (docs/install.md):
#   prefix: `cmake --install BUILD --prefix P`, then from / `P/bin/lmtrain --version` and a 3-step tiny train
#           that holds its validation lines out of one file (data.val unset); every relative link of the
#           installed README and docs resolves under P; in a new directory, `lmtrain corpus get debian-faq` and a
#           3-step train on its data/ paths (skipped without the package); P/share/lmtrain/check_gguf.mjs on
#           that run's GGUF export, finding node-llama-cpp by --modules, and saying how to install it without
#           (skipped without node);
#   deb:    `cpack -G DEB`, `dpkg-deb -I` lists Depends (LibTorch, SentencePiece, OpenBLAS) and Suggests (the
#           corpus packages), and the package unpacked with `dpkg-deb -x` runs the same tiny train.
# Run by CTest (install.prefix, install.deb). Usage: tests/install_test.sh prefix|deb BUILD_DIR TEST_DATA_DIR
set -euo pipefail
mode=$1 build=$(cd "$2" && pwd) data=$(cd "$3" && pwd)
work=$(mktemp -d /tmp/lmtrain-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A 3-step train from / with only data.train set, by the lmtrain at $1.
tiny_train() {
  local lmtrain=$1 run=$work/run-$mode
  cat > "$work/tiny.yaml" <<EOF
run: {dir: $run, seed: 5, threads: 1, blas_threads: 1}
data: {train: $data/tiny_en.txt, val_fraction: 0.1}
tokenizer: {vocab_size: 128}
model: {d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 16}
train: {batch_size: 4, max_steps: 3, warmup_steps: 1, eval_every: 0}
EOF
  (cd / && "$lmtrain" train -c "$work/tiny.yaml") > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "tiny train by $lmtrain"; }
  grep -q "final validation loss" "$work/train.log" || { cat "$work/train.log"; fail "no final validation loss"; }
  grep -q "held out 7 of 70 lines" "$work/train.log" || { cat "$work/train.log"; fail "no held-out line logged"; }
  [ -f "$run/latest" ] && [ -f "$run/val.txt" ] || fail "no checkpoint or val.txt in $run"
  echo "ok: $lmtrain trained 3 steps from /"
}

check_version() {
  local out
  out=$(cd / && "$1" --version) || fail "$1 --version"
  echo "$out"
  grep -Eq '^lmtrain [0-9]+\.[0-9]+\.[0-9]+$' <<<"$out" || fail "no lmtrain version"
  grep -Eq '^LibTorch [0-9]' <<<"$out" || fail "no LibTorch version"
  grep -Eq '^commit [0-9a-z]' <<<"$out" || fail "no commit"
}

# Nothing installed may point back into the build tree.
check_no_build_paths() {
  local f
  for f in "$1"/bin/lmtrain "$1"/lib/lmtrain/lmtrain_full "$1"/lib/lmtrain/liblmtrain_spbridge.so; do
    [ -f "$f" ] || fail "$f not installed"
    if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -qF "$build"; then fail "$f has the build tree in its RPATH"; fi
  done
}

# Every relative link [text](target) of the installed README and docs names an installed file.
check_links() {
  local doc=$1/share/doc/lmtrain md target n=0
  [ -f "$doc/README.md" ] && [ -f "$doc/docs/install.md" ] && [ -f "$doc/docs/report.png" ] || fail "docs not installed in $doc"
  for md in "$doc/README.md" "$doc"/docs/*.md; do
    while IFS= read -r target; do
      target=${target%%#*}
      [ -z "$target" ] && continue
      [ -e "$(dirname "$md")/$target" ] || fail "$md links to $target, which is not installed"
      n=$((n + 1))
    done < <(grep -o '](\([^)]*\))' "$md" | sed 's/^](//; s/)$//' | grep -v '^[a-z]*:' || true)
  done
  echo "ok: $n relative links of the installed README and docs resolve"
}

# `corpus get` from a directory of the user's, then a 3-step train whose config reads the data/ paths there.
corpus_and_train() {
  local lmtrain=$1 here=$work/user
  if ! dpkg-query -W -f='${Status}' debian-faq 2>/dev/null | grep -q "install ok installed"; then
    echo "skip: debian-faq is not installed (scripts/setup.sh installs it)"
    return
  fi
  mkdir -p "$here"
  (cd "$here" && "$lmtrain" corpus get debian-faq) || fail "corpus get debian-faq"
  [ -s "$here/data/debian-faq/train.txt" ] && [ -s "$here/data/debian-faq/val.txt" ] || fail "no data/debian-faq in $here"
  printf '%s\n' "run: {dir: runs/faq, seed: 5, threads: 1, blas_threads: 1}" \
    "data: {train: data/debian-faq/train.txt, val: data/debian-faq/val.txt}" "tokenizer: {vocab_size: 512, byte_fallback: true}" \
    "model: {d_model: 32, n_layers: 1, n_heads: 2, max_seq_len: 16}" \
    "train: {batch_size: 4, max_steps: 3, warmup_steps: 1, eval_every: 0, eval_batches: 2}" > "$here/faq.yaml"
  (cd "$here" && "$lmtrain" train -c faq.yaml) > "$work/faq.log" 2>&1 || { cat "$work/faq.log"; fail "train on the fetched FAQ"; }
  grep -q "final validation loss" "$work/faq.log" || { cat "$work/faq.log"; fail "no final validation loss"; }
  echo "ok: corpus get debian-faq, then 3 steps on data/debian-faq from $here"
}

# The installed check_gguf.mjs on the FAQ run's export (byte pieces: llama.cpp aborts on a character its
# vocabulary lacks): node-llama-cpp by --modules, and without it the install command.
check_gguf_installed() {
  local p=$1 out rc=0
  command -v node > /dev/null || { echo "skip: node is not on PATH (check_gguf.mjs needs node >= 20)"; return; }
  [ -d "$work/user/runs/faq" ] || { echo "skip: no FAQ run to export (debian-faq is not installed)"; return; }
  "$p/bin/lmtrain" export --format gguf --checkpoint "$work/user/runs/faq" --out "$work/tiny.gguf" > /dev/null 2>&1 ||
    fail "export --format gguf"
  out=$(cd / && NODE_PATH= node "$p/share/lmtrain/check_gguf.mjs" --model "$work/tiny.gguf") || rc=$?
  [ "$rc" = 77 ] && grep -q "npm install --prefix DIR node-llama-cpp@3.21.1" <<<"$out" ||
    fail "check_gguf.mjs without node-llama-cpp: exit $rc, $out"
  if [ ! -d "$build/llama-node/node_modules/node-llama-cpp" ]; then
    echo "skip: node-llama-cpp is not in $build/llama-node (scripts/setup.sh installs it)"
    return
  fi
  out=$(cd / && node "$p/share/lmtrain/check_gguf.mjs" --model "$work/tiny.gguf" --modules "$build/llama-node/node_modules") ||
    fail "check_gguf.mjs --modules: $out"
  grep -q "check_gguf: ok" <<<"$out" || fail "check_gguf.mjs: $out"
  echo "ok: the installed check_gguf.mjs ran the FAQ run's export in llama.cpp"
}

case "$mode" in
  prefix)
    cmake --install "$build" --prefix "$work/p" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
    check_no_build_paths "$work/p"
    check_version "$work/p/bin/lmtrain"
    tiny_train "$work/p/bin/lmtrain"
    check_links "$work/p"
    corpus_and_train "$work/p/bin/lmtrain"
    check_gguf_installed "$work/p"
    ;;
  deb)
    (cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg") > "$work/cpack.log" 2>&1 ||
      { cat "$work/cpack.log"; fail "cpack -G DEB"; }
    deb=$(ls "$work"/pkg/lmtrain_*.deb)
    info=$(dpkg-deb -I "$deb")
    echo "$info" | grep -E '^ (Package|Version|Depends|Suggests):'
    echo "$info" | grep -q '^ Suggests: bible-kjv, debian-faq, debian-faq-ko' || fail "Suggests lacks the corpus packages"
    depends=$(echo "$info" | sed -n 's/^ Depends: //p')
    for lib in libtorch libsentencepiece libopenblas0-pthread; do
      grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
    done
    dpkg-deb -x "$deb" "$work/root"
    check_no_build_paths "$work/root/usr"
    check_version "$work/root/usr/bin/lmtrain"
    tiny_train "$work/root/usr/bin/lmtrain"
    ;;
  *) fail "mode: expected prefix or deb, got $mode" ;;
esac
