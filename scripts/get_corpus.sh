#!/usr/bin/env bash
# Fetches a corpus from Debian packages into data/NAME/{train,val}.txt (git-ignored).
#   kjv         King James Bible (package bible-kjv): one verse per line, references stripped;
#               val = the last ~10% of verses (a contiguous tail), train = the rest.
#   debian-faq  The Debian FAQ in English (package debian-faq), one paragraph per line (wrapped lines
#               joined, non-breaking spaces made plain: scripts/join_wrapped.py); val = the last ~10%.
#   debian-faq-ko  The Debian FAQ in Korean (package debian-faq-ko), the same way; a wrap inside a Hangul
#               word joins without a space.
# Usage: scripts/get_corpus.sh kjv|debian-faq|debian-faq-ko
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:-kjv}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" && return 0
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$1"
}
split() {  # split FILE DIR: contiguous 90/10 split by lines
  local total val
  total=$(wc -l < "$1")
  val=$(( total / 10 ))
  head -n $(( total - val )) "$1" > "$2/train.txt"
  tail -n "$val" "$1" > "$2/val.txt"
  echo "corpus $name: $(wc -l < "$2/train.txt") train lines, $(wc -l < "$2/val.txt") val lines in $2"
}
out="data/$name"
mkdir -p "$out"
case "$name" in
  kjv)
    need bible-kjv
    # "Ge1:1 In the beginning ..." -> "In the beginning ..."
    bible -f gen1:1-rev22:21 | sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //' | grep -v '^[[:space:]]*$' > "$out/all.txt"
    split "$out/all.txt" "$out"
    ;;
  debian-faq|debian-faq-ko)
    need "$name"
    if [ "$name" = debian-faq-ko ]; then
      txt=/usr/share/doc/debian/FAQ/debian-faq.ko.txt.gz
    else
      txt=/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz
      [ -f "$txt" ] || txt=/usr/share/doc/debian/FAQ/debian-faq.txt.gz
    fi
    # One paragraph per line: wrapped lines rejoined the way the language needs (Hangul wrapped inside a
    # word joins without a space), non-breaking spaces made plain (scripts/join_wrapped.py).
    zcat "$txt" | python3 scripts/join_wrapped.py --stats > "$out/all.txt"
    split "$out/all.txt" "$out"
    ;;
  *)
    echo "usage: $0 kjv|debian-faq|debian-faq-ko" >&2
    exit 2
    ;;
esac
rm -f "$out/all.txt"
