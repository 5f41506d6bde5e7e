#!/usr/bin/env bash
# The installed lmtrain, away from its build tree (docs/install.md):
#   prefix: `cmake --install BUILD --prefix P`, then from / `P/bin/lmtrain --version` and a 3-step tiny train
#           that holds its validation lines out of one file (data.val unset);
#   deb:    `cpack -G DEB`, `dpkg-deb -I` lists Depends (LibTorch, SentencePiece, OpenBLAS), and the package
#           unpacked with `dpkg-deb -x` runs the same tiny train.
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

case "$mode" in
  prefix)
    cmake --install "$build" --prefix "$work/p" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
    check_no_build_paths "$work/p"
    check_version "$work/p/bin/lmtrain"
    tiny_train "$work/p/bin/lmtrain"
    ;;
  deb)
    (cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg") > "$work/cpack.log" 2>&1 ||
      { cat "$work/cpack.log"; fail "cpack -G DEB"; }
    deb=$(ls "$work"/pkg/lmtrain_*.deb)
    info=$(dpkg-deb -I "$deb")
    echo "$info" | grep -E '^ (Package|Version|Depends):'
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
