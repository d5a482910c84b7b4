#!/usr/bin/env python3
"""Checks that nothing an earlier README said was lost when its text moved into the docs.

Usage: python3 scripts/docs-moved.py [REV]   (REV: the commit whose README.md is the old one; default
9dde8a22, the last README before the User Guide). Run from the repository root.

The old README is cut into units: each paragraph, each list item, each table row, each fenced code
block and each heading. A unit is kept when its text appears in the README of the work tree, a page
of docs/guide/ or docs/development.md, compared modulo heading levels, link targets (`[label](x)`
is `[label]`) and line breaks. A unit not found whole is cut into its sentences and clauses
(at `. `, `; ` and table cells); the ones found nowhere are printed. Units changed on purpose when
they moved are listed in CHANGED (by the start of their text) with the reason, and reported as such.
Exit status 1 when any other unit is missing.
"""
import glob
import re
import subprocess
import sys

REV = sys.argv[1] if len(sys.argv) > 1 else "9dde8a22"

# Units of the old README changed on purpose when the text moved: the start of the unit's text
# (normalised as `norm` does) and why.
CHANGED = {
    "Each kind takes only its own settings": "three merged copies of one sentence made one true sentence",
    "```toml [dependencies] switchyard = { path": "the default features named in full (issue 44)",
    "Leave out Redis, metrics or multipart edits": "names every optional part (issue 44)",
    '```toml switchyard = { version = "0.1"': "no published version: a git or path dependency (issue 44)",
    "- **`providers`**: one entry per provider account": "`see below`: a link to the page it now is",
    "- **`models`**: public model name": "`below`: links to the pages they now are",
    "| `seedream-5-pro` |": "`see below`: a link to the page it now is",
    "`POST /api/v1/audio/speech`, `POST /api/v1/images/generations`": "`below`: links to the pages",
    "| rerank `return_documents` |": "`see Providers`: a link to the rerank providers page",
    "| `task_status` |": "`see below`: a link to the page it now is",
    "| `aspect_ratio` |": "`the families table`: a link",
    "| speech input length |": "`the table above`: a link to the families page",
    "The repository ships a Grafana dashboard": "`the metrics above`: a link to the metrics page",
    "**The package.**": "`this README` is `the README` on a guide page",
}


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
missing, changed = [], []
for kind, unit in units(old):
    total += 1
    if norm(unit) in corpus:
        whole += 1
        continue
    lost = [f for f in fragments(unit) if f not in corpus]
    why = next((r for k, r in CHANGED.items() if norm(unit).startswith(k)), None)
    if lost and why:
        changed.append((kind, unit, why))
    elif lost:
        missing.append((kind, unit, lost))
    else:
        by_parts += 1

print(f"old README ({REV}): {total} units; found whole: {whole}; found sentence by sentence: {by_parts}; "
      f"changed on purpose: {len(changed)}; missing: {len(missing)}")
for kind, unit, why in changed:
    print(f"  changed ({why}): {kind}: {norm(unit)[:100]}")
for kind, unit, lost in missing:
    print(f"\n--- {kind}: {norm(unit)[:160]}")
    for f in lost:
        print(f"    not found: {f[:200]}")
sys.exit(1 if missing else 0)
