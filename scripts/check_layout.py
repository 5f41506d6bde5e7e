#!/usr/bin/env python3
"""Checks the shape of src/ that docs/ARCHITECTURE.md promises, and exits 1 naming every breach:

1. layers: each folder of src/ includes only the folders listed for it in ALLOWED below, and the folder
   graph has no cycle (so tokenizer/, data/ and model/ never reach train/, sample/, inspect/, cli/, config/);
2. file length: no file in src/ over MAX_FILE_LINES lines;
3. function length: no function body in src/ over MAX_FUNCTION_LINES lines. A function is found the way
   this codebase (clang-format style) writes them: a signature line at namespace or class scope, its "{"
   at the end of that line or of a continuation line, and its body ending at the first later line that
   is "}" at the signature's indentation;
4. citations: every `docs/NAME.md "Section"` in src/, configs/, scripts/ and CMakeLists.txt names a file
   of the repository and one of its headings, and nothing cites a design file outside the repository.

Run by scripts/test.sh through CTest (test name layout.check). Usage: scripts/check_layout.py [SRC_DIR]
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


CITATION = re.compile(r'docs/([A-Za-z_]+\.md)(?:\s+"([^"]+)")?')


def check_citations(root, problems):
    places = [root / "CMakeLists.txt"] + sorted(p for d in ("src", "configs", "scripts") for p in (root / d).rglob("*")
                                                 if p.is_file() and p.suffix in (".h", ".cpp", ".yaml", ".sh", ".py"))
    for f in places:
        if f.name == "check_layout.py":
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{f.relative_to(root)}:{n}"
            if "DESIGN.md" in line:
                problems.append(f"{where}: cites DESIGN.md, which is not in the repository (use docs/ARCHITECTURE.md)")
            for m in CITATION.finditer(line):
                doc = root / "docs" / m.group(1)
                if not doc.is_file():
                    problems.append(f"{where}: cites docs/{m.group(1)}, which does not exist")
                elif m.group(2):
                    headings = {h.lstrip("#").strip() for h in doc.read_text(encoding="utf-8").splitlines()
                                if h.startswith("#")}
                    if m.group(2) not in headings:
                        problems.append(f"{where}: docs/{m.group(1)} has no section \"{m.group(2)}\"")


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    files = sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cpp"))
    if not files:
        print(f"check_layout: no sources under {src}")
        return 1
    problems = []
    check_includes(src, files, problems)
    check_lengths(src, files, problems)
    check_citations(src.parent, problems)
    for p in problems:
        print("check_layout:", p)
    print(f"check_layout: {len(files)} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
