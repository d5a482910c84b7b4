#!/usr/bin/env python3
"""Checks that nothing an earlier README said was lost when its text moved into the docs.

Usage: python3 scripts/docs-moved.py [REV]   (REV: the commit whose README.md is the old one; default
9dde8a22, the last README before the User Guide). Run from the repository root.

The old README is cut into units: each paragraph, each list item, each table row, each fenced code
block and each heading. A unit is kept when its text appears in the README of the work tree, a page
of docs/guide/ or docs/development.md, compared modulo heading levels, link targets (`[label](x)`
is `[label]`) and line breaks. A unit not found whole is cut into its sentences and clauses
(at `. `, `; ` and table cells); the ones found nowhere are printed. Exit status 1 when any unit is
missing.
"""
import glob
import re
import subprocess
import sys

REV = sys.argv[1] if len(sys.argv) > 1 else "9dde8a22"


def norm(text):
    text = re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"[\1]", text)  # link targets
    text = re.sub(r"^#+ ", "", text, flags=re.M)  # heading levels
    text = re.sub(r"<a id=\"[^\"]*\"></a>", "", text)  # explicit anchors
    return " ".join(text.split())


def units(text):
    """(kind, text) for every paragraph, list item, table row, code block and heading."""
    out, block, fence = [], [], None
    lines = text.split("\n")

    def flush():
        if block:
            out.append(("paragraph", "\n".join(block)))
            block.clear()

    for line in lines:
        if fence is not None:
            fence.append(line)
            if line.startswith("```"):
                out.append(("code", "\n".join(fence)))
                fence = None
            continue
        if line.startswith("```"):
            flush()
            fence = [line]
        elif not line.strip():
            flush()
        elif line.startswith("#"):
            flush()
            out.append(("heading", line))
        elif line.startswith("|"):
            flush()
            if not re.match(r"^\|[-| :]+\|$", line):
                out.append(("table row", line))
        elif re.match(r"^\s*[-*] ", line) and not line.startswith("  "):
            flush()
            block.append(line)
        else:
            block.append(line)
    flush()
    # A list item runs to the next item: split paragraphs that are lists.
    result = []
    for kind, t in out:
        if kind == "paragraph" and re.match(r"^[-*] ", t):
            for item in re.split(r"\n(?=[-*] )", t):
                result.append(("list item", item))
        else:
            result.append((kind, t))
    return result


def fragments(unit):
    parts = re.split(r"(?<=[.;])\s+|\s\|\s", norm(unit))
    return [p.strip(" |") for p in parts if len(p.strip(" |")) > 3]


old = subprocess.run(["git", "show", f"{REV}:README.md"], capture_output=True, text=True, check=True).stdout
new_files = ["README.md", "docs/development.md"] + sorted(glob.glob("docs/guide/*.md"))
corpus = norm("\n".join(open(f, encoding="utf-8").read() for f in new_files))

total = whole = by_parts = 0
missing = []
for kind, unit in units(old):
    total += 1
    if norm(unit) in corpus:
        whole += 1
        continue
    lost = [f for f in fragments(unit) if f not in corpus]
    if lost:
        missing.append((kind, unit, lost))
    else:
        by_parts += 1

print(f"old README ({REV}): {total} units; found whole: {whole}; found sentence by sentence: {by_parts}; "
      f"missing: {len(missing)}")
for kind, unit, lost in missing:
    print(f"\n--- {kind}: {norm(unit)[:160]}")
    for f in lost:
        print(f"    not found: {f[:200]}")
sys.exit(1 if missing else 0)
