#!/usr/bin/env python3
"""Turns a hard-wrapped text (the Debian FAQ's .txt) into one paragraph per line, the way its language needs.

- Paragraphs are separated by blank lines; inside one, wrapped lines are joined.
- Non-breaking spaces (U+00A0, and the narrow U+202F) become plain spaces; runs of spaces become one.
- A wrap between two Latin words (or digits, punctuation) becomes one space, as before.
- A wrap touching Hangul is a problem: the formatter that made the FAQ's Korean text breaks a full line at
  any character, inside a word as readily as at a space, and drops the space when there was one. Korean
  writes particles and endings onto their word ("무엇인가요?", "조건에 따라"), so a wrong space splits a
  word and the tokenizer learns the split ("▁있 ▁ 나요"). Which it was is decided from the text itself,
  from the words found inside lines (never touched by a wrap): glued when the next line's first fragment
  more often ends a word ("요?", "습니다.", "포하면") than starts one ("않습니다.", "수", "따라"), weighed by
  whether the fragment before the wrap more often starts a longer word ("대" of "대체") than stands alone
  ("예를"); a fragment never seen counts as an ending when its first syllable seldom starts a word.
Usage: join_wrapped.py [--stats] < wrapped.txt > paragraphs.txt   (--stats: counts on stderr)
"""
import collections
import re
import sys

NBSP = re.compile("[\u00a0\u202f]")
EDGE_PUNCT = "\"'()[]{}<>.,:;!?\u00b7\u2026\u201c\u201d\u2018\u2019\u300c\u300d"


def is_hangul(ch):
    return "\uac00" <= ch <= "\ud7a3" or "\u1100" <= ch <= "\u11ff" or "\u3130" <= ch <= "\u318f"


def core(token):
    """A token without the punctuation around it ("요?" -> "요")."""
    return token.strip(EDGE_PUNCT)


def paragraphs(text):
    """Lists of stripped, NBSP-normalised lines, one list per paragraph."""
    para = []
    for raw in text.split("\n"):
        line = re.sub(r"[ \t]+", " ", NBSP.sub(" ", raw)).strip()
        if line:
            para.append(line)
        elif para:
            yield para
            para = []
    if para:
        yield para


class Evidence:
    """What the words inside lines (never touched by a wrap) say about where words start and end."""

    def __init__(self, paras):
        self.starts = collections.Counter()  # inner words beginning with a string (the word itself included)
        self.ends = collections.Counter()    # inner words longer than a string and ending with it
        self.first = collections.Counter()   # syllables at the start of an inner word
        self.seen = collections.Counter()    # syllables anywhere in an inner word
        self.words = collections.Counter()   # inner words themselves
        for para in paras:
            for line in para:
                for token in line.split(" ")[1:-1]:
                    word = core(token)
                    self.words[word] += 1
                    for i in range(1, min(len(word), 12) + 1):
                        self.starts[word[:i]] += 1
                        if i < len(word):
                            self.ends[word[-i:]] += 1
                    if word:
                        self.first[word[0]] += 1
                        for ch in word:
                            self.seen[ch] += 1

    def glued(self, before, fragment):
        """Whether `fragment`, found at the start of a wrapped line, continues the word `before` it: the odds
        that the fragment ends a word rather than starts one, times the odds that `before` starts a longer
        word rather than being one."""
        if not fragment:
            return False
        right = (self.ends[fragment] + 0.5) / (self.starts[fragment] + 0.5)
        left = (self.starts[before] - self.words[before] + 0.5) / (self.words[before] + 0.5) if before else 1.0
        if self.starts[fragment] + self.ends[fragment] == 0:  # a fragment never seen: does its syllable start words?
            ch = fragment[0]
            right = 4.0 if self.seen[ch] == 0 or self.first[ch] < 0.25 * self.seen[ch] else 0.25
        return right * left > 1.0


URL_OPEN = re.compile(r"\w+://\S*$")


def glue(left, right, evidence, anywhere=False):
    """Whether the wrap between the line ending `left` and the line starting `right` was inside a word.
    `anywhere`: the text's formatter broke lines at any character (the Korean FAQ's did), so a URL cut in
    two, or a line starting with closing punctuation, continues the line before it."""
    last, first = left.split(" ")[-1], right.split(" ")[0]
    if anywhere and ((URL_OPEN.search(last) and not last.endswith(")")) or first[0] in "/:,.;?!)"):
        return True
    if not (is_hangul(last[-1]) and is_hangul(first[0])):
        # Latin, digits or punctuation on a side: a space, as the English text needs; Korean particles after
        # a Latin word ("GNU/Linux에서") are glued when the fragment is one
        return is_hangul(first[0]) and last[-1].isalnum() and evidence.glued("", core(first))
    return evidence.glued(core(last), core(first))


def join(text, stats=None):
    paras = list(paragraphs(text))
    evidence = Evidence(paras)
    anywhere = any(is_hangul(ch) for ch in text)  # Korean text: wrapped at any character
    out = []
    for para in paras:
        joined = para[0]
        for line in para[1:]:
            inside = glue(joined, line, evidence, anywhere)
            if stats is not None:
                stats["wraps"] += 1
                stats["joined without a space" if inside else "joined with a space"] += 1
            joined += ("" if inside else " ") + line
        out.append(joined)
    return "\n".join(out) + "\n"


def main():
    text = sys.stdin.read()
    stats = collections.Counter() if "--stats" in sys.argv else None
    sys.stdout.write(join(text, stats))
    if stats is not None:
        stats["lines with a non-breaking space (input)"] = sum(1 for l in text.split("\n") if NBSP.search(l))
        for k, v in sorted(stats.items()):
            print("join_wrapped: %s: %d" % (k, v), file=sys.stderr)


if __name__ == "__main__":
    main()
