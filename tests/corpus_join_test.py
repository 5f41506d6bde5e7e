#!/usr/bin/env python3
"""`lmtrain corpus get` on the real Debian FAQ texts (packages debian-faq, debian-faq-ko), its train.txt and
val.txt read back as one text, run by CTest as corpus.join: against the plain join (every wrap a space),
- Korean: no sentence ending split off its word ("무엇인가 요?", "것입니 다."), words split at a wrap come
  back whole, word boundaries at a wrap keep their space, and no non-breaking space is left;
- English: exactly the same words (every wrap is still a space), and no non-breaking space is left.
Also: the split is the last tenth of the lines for val. Prints the before/after figures. Exit 77 (skipped, reason
printed) when the FAQ packages are missing.
Usage: corpus_join_test.py PATH/TO/lmtrain
"""
import gzip
import os
import re
import subprocess
import sys
import tempfile

FAQ = "/usr/share/doc/debian/FAQ"
ENDINGS = re.compile(r"(요|다|까|죠|니다|세요|나요|가요|어요|해요|습니다)[.?!]+")
failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def plain_join(text):
    """The old rule: each blank-line paragraph on one line, every wrap a space (NBSP left as it was)."""
    out = []
    for para in re.split(r"\n[ \t]*\n", text):
        line = re.sub(r"[ \t]+", " ", re.sub(r"[ \t]*\n[ \t]*", " ", para)).strip()
        if line:
            out.append(line)
    return "\n".join(out) + "\n"


def figures(text):
    tokens = text.split()
    return (sum(1 for t in tokens if ENDINGS.fullmatch(t)), sum(1 for l in text.splitlines() if "\u00a0" in l),
            len(text.splitlines()))


def main():
    paths = {lang: os.path.join(FAQ, "debian-faq.%s.txt.gz" % lang) for lang in ("en", "ko")}
    missing = [p for p in paths.values() if not os.path.exists(p)]
    if missing:
        print("SKIPPED: %s missing (scripts/setup.sh installs debian-faq and debian-faq-ko)" % ", ".join(missing))
        return 77
    raw = {lang: gzip.open(p, "rt", encoding="utf-8").read() for lang, p in paths.items()}
    new = {}
    with tempfile.TemporaryDirectory() as tmp:
        for lang, name in (("en", "debian-faq"), ("ko", "debian-faq-ko")):
            out = os.path.join(tmp, name)
            run = subprocess.run([sys.argv[1], "corpus", "get", name, "--out", out], capture_output=True, text=True)
            print(run.stdout.strip())
            check(run.returncode == 0, "corpus get %s exits 0 (%d: %s)" % (name, run.returncode, run.stderr.strip()))
            train = open(os.path.join(out, "train.txt"), encoding="utf-8").read()
            val = open(os.path.join(out, "val.txt"), encoding="utf-8").read()
            total = len((train + val).splitlines())
            check(len(val.splitlines()) == total // 10, "%s: val is the last tenth of %d lines" % (name, total))
            new[lang] = train + val
    old = {lang: plain_join(t) for lang, t in raw.items()}

    ends_old, nbsp_old, lines_old = figures(old["ko"])
    ends_new, nbsp_new, lines_new = figures(new["ko"])
    print("Korean FAQ: sentence endings split off their word: %d before, %d after; lines with NBSP: %d of %d before, "
          "%d of %d after" % (ends_old, ends_new, nbsp_old, lines_old, nbsp_new, lines_new))
    check(ends_old >= 40, "the plain join splits many endings (%d)" % ends_old)
    check(ends_new == 0, "no ending is split after (%d)" % ends_new)
    check(nbsp_new == 0 and nbsp_old > 200, "non-breaking spaces normalised")
    old_spaced = re.sub("[ \u00a0]+", " ", old["ko"])  # where the old join left "배 \u00a0\u00a0 포하면"
    for whole, split in [("무엇인가요?", "무엇인가 요?"), ("배포하면", "배 포하면"), ("번역본에", "번역 본에"),
                         ("어떻게", "어떻 게"), ("버그", "버 그")]:
        check(whole in new["ko"] and split not in new["ko"] and split in old_spaced, "%s whole again (was '%s')" % (whole, split))
    urls_split = len(re.findall(r"https?:// ", new["ko"]))
    check(urls_split == 0, "no URL split at a wrap in the Korean text (%d; the plain join: %d)" %
          (urls_split, len(re.findall(r"https?:// ", old_spaced))))
    for kept in ["조건에 따라", "아니라 자유를", "예를 들어"]:
        check(kept in new["ko"], "a boundary at a wrap keeps its space: '%s'" % kept)
    norm = lambda t: re.sub(r"\s+", " ", t.replace("\u00a0", " ")).split()
    check(norm(new["en"]) == norm(old["en"]), "English: the same %d words, every wrap a space" % len(norm(old["en"])))
    _, nbsp_en_old, lines_en_old = figures(old["en"])
    _, nbsp_en_new, lines_en_new = figures(new["en"])
    print("English FAQ: lines with NBSP: %d of %d before, %d of %d after" % (nbsp_en_old, lines_en_old, nbsp_en_new, lines_en_new))
    check(nbsp_en_new == 0, "English: no non-breaking space left")
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
