#!/usr/bin/env python3
"""Keeps the key table of docs/config.md equal to `lmtrain train --list-keys`.

The table sits between the lines `<!-- keys:start -->` and `<!-- keys:end -->`; the prose around it is written
by hand. One row per key, in --list-keys order: key, default, meaning (the binary's own help text).

Usage: scripts/config_doc.py --check LMTRAIN [DOC]    exit 1 (with a diff) when the table is stale
       scripts/config_doc.py --write LMTRAIN [DOC]    rewrite the table in place
Run by scripts/test.sh through CTest (test name config.doc).
"""
import difflib
import pathlib
import subprocess
import sys

START, END = "<!-- keys:start -->", "<!-- keys:end -->"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(lmtrain: str) -> str:
    out = subprocess.run([lmtrain, "train", "--list-keys"], check=True, capture_output=True, text=True).stdout
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for line in out.splitlines():
        key, default, meaning = line.split("\t", 2)
        rows.append(f"| `{key}` | {cell(f'`{default}`')} | {cell(meaning)} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in ("--check", "--write"):
        print(__doc__)
        return 2
    doc = pathlib.Path(sys.argv[3] if len(sys.argv) > 3 else pathlib.Path(__file__).parent.parent / "docs" / "config.md")
    text = doc.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"config_doc: {doc} lacks the {START} ... {END} lines")
        return 1
    head, rest = text.split(START, 1)
    old, tail = rest.split(END, 1)
    want = "\n" + table(sys.argv[2])
    if sys.argv[1] == "--write":
        doc.write_text(head + START + want + END + tail, encoding="utf-8")
        print(f"config_doc: wrote {doc}")
        return 0
    if old == want:
        print(f"config_doc: {doc} lists the {want.count(chr(10)) - 3} keys of --list-keys")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), want.splitlines(True), "docs/config.md", "--list-keys"))
    print(f"config_doc: {doc} is stale: run scripts/config_doc.py --write build/lmtrain")
    return 1


if __name__ == "__main__":
    sys.exit(main())
