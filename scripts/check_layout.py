#!/usr/bin/env python3
"""Checks the shape of src/ that docs/ARCHITECTURE.md promises, and exits 1 naming every breach:

1. layers: each folder of src/ includes only the folders listed for it in ALLOWED below, and the folder
   graph has no cycle (so tokenizer/, data/ and model/ never reach train/, sample/, inspect/, cli/, config/);
2. file length: no file in src/ over MAX_FILE_LINES lines;
3. function length: no function body in src/ over MAX_FUNCTION_LINES lines. A function is found the way
   this codebase (clang-format style) writes them: a signature line at namespace or class scope, its "{"
   at the end of that line or of a continuation line, and its body ending at the first later line that
   is "}" at the signature's indentation;
4. citations: every `docs/NAME.md "Section"`, `NAME.md "Section"` and `README "Section"` in src/, configs/,
   scripts/, tests/, docs/, README.md and CMakeLists.txt names a file of the repository and one of its
   headings, and nothing cites a design file outside the repository;
5. links: every relative link `[text](target)` in README.md and docs/*.md names a file of the repository,
   and a `#fragment` one of that file's headings (GitHub's slugs);
6. the fused kernels stay behind their seam: only the files of src/model/fused/ and FUSED_BUILDERS (the one
   place that builds the fused set of operations) include "model/fused/...", so the reference model files,
   the trainer and the optimizers see the operations only through model/ops.h.

Run by scripts/test.sh through CTest (test names layout.check, and layout.selftest for --self-test, which
plants a bad citation, heading and link in a copy of the tree and expects each to be reported).
Usage: scripts/check_layout.py [SRC_DIR] | --self-test
"""
import pathlib
import re
import sys

MAX_FILE_LINES = 350
MAX_FUNCTION_LINES = 80

# Which folders each folder may include (besides itself). The order is the one-way layering:
# util <- dist, tokenizer, data, model <- checkpoint <- train, sample, inspect, export <- config <- report <- cli <- main.cpp
ALLOWED = {
    "util": set(),
    "dist": {"util"},
    "tokenizer": {"util"},
    "model": {"util"},
    "data": {"util", "tokenizer"},
    "checkpoint": {"util", "model"},
    "train": {"util", "tokenizer", "data", "model", "checkpoint", "dist"},
    "sample": {"util", "tokenizer", "model"},
    "inspect": {"util", "tokenizer", "data", "model", "checkpoint", "sample"},
    "export": {"util", "tokenizer", "model", "checkpoint"},
    "report": {"util", "tokenizer", "data", "model", "checkpoint", "train", "sample", "inspect", "config"},
    "config": {"util", "tokenizer", "model", "checkpoint", "train", "dist"},
    "cli": {"util", "tokenizer", "data", "model", "checkpoint", "train", "sample", "inspect", "export", "config", "dist",
            "report"},
    ".": {"cli", "util"},  # src/main.cpp
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

FUSED_DIR = "model/fused"
FUSED_BUILDERS = {"model/make_ops.cpp"}


def check_fused_seam(src, files, problems):
    for f in files:
        rel = f.relative_to(src).as_posix()
        if rel.startswith(FUSED_DIR + "/") or rel in FUSED_BUILDERS:
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1).startswith(FUSED_DIR + "/"):
                problems.append(f"{rel}:{n}: includes {m.group(1)}: only {FUSED_DIR}/ and "
                                f"{', '.join(sorted(FUSED_BUILDERS))} may (docs/ARCHITECTURE.md \"The model's operations\")")


def folder_of(src: pathlib.Path, path: pathlib.Path) -> str:
    rel = path.relative_to(src)
    return rel.parts[0] if len(rel.parts) > 1 else "."


def check_includes(src, files, problems):
    edges = {}
    for f in files:
        here = folder_of(src, f)
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue
            there = m.group(1).split("/")[0]
            if not (src / there).is_dir() or there == here:
                continue
            edges.setdefault(here, set()).add(there)
            if here not in ALLOWED:
                problems.append(f"{f.relative_to(src)}: folder '{here}' is not in ALLOWED of check_layout.py")
            elif there not in ALLOWED[here]:
                problems.append(f"{f.relative_to(src)}:{n}: {here}/ must not include {m.group(1)} "
                                f"({here}/ may include: {', '.join(sorted(ALLOWED[here])) or 'nothing'})")
    # A cycle among folders (also guards the ALLOWED table itself).
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt]
                problems.append("include cycle between folders: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


NOT_A_DEFINITION = ("if", "for", "while", "switch", "else", "do", "return", "case", "try", "catch", "namespace",
                    "struct", "class", "enum", "union", "extern", "template", "using", "public:", "private:",
                    "protected:", "static_assert", "typedef")


def starts_definition(stripped: str) -> bool:
    """A line that can begin a function definition: a signature with "(", not a statement, not a
    variable initialised with "=" (lambdas, tables)."""
    if not stripped or stripped[0] in "#/*}):,\"<" or "(" not in stripped:
        return False
    if stripped.split()[0].rstrip("(") in NOT_A_DEFINITION:
        return False
    before_paren = stripped[:stripped.index("(")]
    return "=" not in before_paren or "operator" in before_paren


def check_lengths(src, files, problems):
    for f in files:
        lines = f.read_text(encoding="utf-8").splitlines()
        rel = f.relative_to(src)
        if len(lines) > MAX_FILE_LINES:
            problems.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE_LINES})")
        # Outermost function definitions, at namespace scope or inside a class: the body ends at the first
        # later line that is the closing brace at the definition's own indentation.
        start = pending = None
        indent = ""
        for n, line in enumerate(lines, 1):
            stripped = line.strip()
            if start is not None:
                if line in (indent + "}", indent + "};"):
                    body = n - start + 1
                    if body > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{start}: function of {body} lines (at most {MAX_FUNCTION_LINES}): "
                                        f"{lines[start - 1].strip()[:90]}")
                    start = None
                continue
            if pending is None and starts_definition(stripped):
                pending, indent = n, line[:len(line) - len(line.lstrip())]
            if pending is not None:
                if stripped.endswith(";") or stripped.endswith("}") or stripped.endswith("};"):
                    pending = None  # a declaration, or a definition on one line
                elif stripped.endswith("{"):
                    start, pending = pending, None


CITATION = re.compile(r'(?:(docs/)?([A-Za-z_][A-Za-z0-9_-]*\.md)\)?|(README)(?:\.md)?)\s+"([^"]+)"')
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')


def headings(doc: pathlib.Path):
    """The headings of a Markdown file, outside fenced code blocks, as written (without the #s)."""
    out, fenced = set(), False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(line.lstrip("#").strip())
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def cited_file(root, where_file, m):
    """The file a citation names: docs/X.md, README.md, or a bare X.md beside the citing doc or in docs/."""
    if m.group(3) or m.group(2) == "README.md":
        return root / "README.md"
    if m.group(1):
        return root / "docs" / m.group(2)
    beside = where_file.parent / m.group(2)
    return beside if beside.is_file() else root / "docs" / m.group(2)


def check_citations(root, problems):
    places = [root / "CMakeLists.txt", root / "README.md"] + sorted(
        p for d in ("src", "configs", "scripts", "tests", "docs") for p in (root / d).rglob("*")
        if p.is_file() and p.suffix in (".h", ".cpp", ".yaml", ".sh", ".py", ".mjs", ".md", ".in", ".inc"))
    for f in places:
        if f.name == "check_layout.py" or not f.is_file():
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{f.relative_to(root)}:{n}"
            if "DESIGN.md" in line:
                problems.append(f"{where}: cites DESIGN.md, which is not in the repository (use docs/ARCHITECTURE.md)")
            for m in CITATION.finditer(line):
                doc = cited_file(root, f, m)
                name = doc.relative_to(root) if doc.is_relative_to(root) else doc
                if not doc.is_file():
                    problems.append(f"{where}: cites {name}, which does not exist")
                elif m.group(4) not in headings(doc):
                    problems.append(f"{where}: {name} has no section \"{m.group(4)}\"")


def check_links(root, problems):
    for f in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        fenced = False
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
            if fenced:
                continue
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, file:, mailto:
                path, _, fragment = target.partition("#")
                doc = (f.parent / path).resolve() if path else f
                where = f"{f.relative_to(root)}:{n}"
                if not doc.exists():
                    problems.append(f"{where}: link to {target}, which does not exist")
                elif fragment and doc.suffix == ".md" and fragment not in {slug(h) for h in headings(doc)}:
                    problems.append(f"{where}: link to {target}: {doc.name} has no heading with that anchor")


def self_test() -> int:
    """Plants one bad citation, one bad heading and one bad link in a copy of the docs; each must be found."""
    import shutil
    import tempfile
    root = pathlib.Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "tree"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("build*", "runs", "data", ".git", "node_modules"))
        clean = []
        check_citations(copy, clean)
        check_links(copy, clean)
        if clean:
            print("check_layout --self-test: the unplanted copy already fails:", *clean, sep="\n  ")
            return 1
        with open(copy / "docs" / "training.md", "a", encoding="utf-8") as out:
            out.write('\nSee README "No Such Heading", docs/NOPE.md "X", [gone](missing.md) and [bad](config.md#no-such-anchor).\n')
        with open(copy / "scripts" / "planted.sh", "w", encoding="utf-8") as out:
            out.write('# docs/training.md "Not A Section"\n')
        with open(copy / "src" / "model" / "mlp.cpp", "a", encoding="utf-8") as out:
            out.write('#include "model/fused/kernels.h"\n')
        found = []
        check_citations(copy, found)
        check_links(copy, found)
        check_fused_seam(copy / "src", sorted((copy / "src").rglob("*.cpp")), found)
    want = ['README.md has no section "No Such Heading"', "cites docs/NOPE.md, which does not exist",
            "link to missing.md, which does not exist", "link to config.md#no-such-anchor",
            'docs/training.md has no section "Not A Section"', "model/mlp.cpp:"]
    missed = [w for w in want if not any(w in p for p in found)]
    for w in missed:
        print("check_layout --self-test: not reported:", w)
    print(f"check_layout --self-test: {len(want) - len(missed)} of {len(want)} planted problems reported")
    return 1 if missed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    files = sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cpp"))
    if not files:
        print(f"check_layout: no sources under {src}")
        return 1
    problems = []
    check_includes(src, files, problems)
    check_fused_seam(src, files, problems)
    check_lengths(src, files, problems)
    check_citations(src.parent, problems)
    check_links(src.parent, problems)
    for p in problems:
        print("check_layout:", p)
    print(f"check_layout: {len(files)} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
