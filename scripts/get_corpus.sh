#!/usr/bin/env bash
# The repository's corpora in data/NAME/{train,val}.txt (git-ignored): installs the Debian package when it is
# missing (`lmtrain corpus get` itself never runs apt), then runs `build/lmtrain corpus get NAME --out data/NAME`,
# which reads the package and splits the text (docs/training.md "Corpora").
# Usage: scripts/get_corpus.sh kjv|debian-faq|debian-faq-ko
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:-kjv}"
case "$name" in
  kjv) package=bible-kjv ;;
  debian-faq|debian-faq-ko) package=$name ;;
  *) echo "usage: $0 kjv|debian-faq|debian-faq-ko" >&2; exit 2 ;;
esac
if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$package"
fi
bash scripts/setup.sh lmtrain   # builds build/lmtrain, or brings it up to date
build/lmtrain corpus get "$name" --out "data/$name"
