#!/usr/bin/env python3
"""List the functions in a Rust source tree longer than a limit (default 80 lines).

A function's length runs from its `fn` line to its closing brace, both included. Functions
inside `impl` and `trait` blocks and nested functions count too; test modules do not: a
`#[cfg(test)] mod NAME { ... }` block is skipped, and so is the file of a
`#[cfg(test)] mod NAME;` declaration.

Usage: scripts/long-fns.py [SRC_DIR] [LIMIT]    (exit status 1 when any function is over)
"""
import os
import re
import sys


def blank(text):
    """The text with comments, strings and char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'b?r#*"', text[i:i + 80]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:  # a char literal; otherwise a lifetime
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(code, open_at):
    """The index of the brace closing the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([{;])")
FN = re.compile(r"\bfn\s+(\w+)")


def scan(path, limit, skip_files):
    with open(path, encoding="utf-8") as f:
        code = blank(f.read())
    skipped = []  # (start, end) character ranges of inline test modules
    for m in TEST_MOD.finditer(code):
        if m.group(2) == "{":
            skipped.append((m.start(), matching(code, m.end() - 1)))
        else:
            base = os.path.dirname(path)
            stem = os.path.splitext(os.path.basename(path))[0]
            if stem not in ("mod", "lib", "main"):
                base = os.path.join(base, stem)
            skip_files.add(os.path.join(base, m.group(1) + ".rs"))
            skip_files.add(os.path.join(base, m.group(1), "mod.rs"))
    found = []
    for m in FN.finditer(code):
        if any(a <= m.start() <= b for a, b in skipped):
            continue
        # The body opens at the first `{` outside the signature's parentheses, brackets and
        # generics; a `;` first means a declaration without a body.
        depth, j = 0, m.end()
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch in "{;":
                break
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        end = matching(code, j)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end) + 1
        if last - first + 1 > limit:
            found.append((last - first + 1, path, first, m.group(1)))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    files = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")
    )
    skip_files, found = set(), []
    for path in files:
        found += scan(path, limit, skip_files)
    found = [x for x in found if x[1] not in skip_files]
    for length, path, line, name in sorted(found, reverse=True):
        print(f"{length:4} {path}:{line} {name}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
