#!/usr/bin/env python3
"""No function in orchestrator/ longer than the limit (issue 15: 120 lines), data tables
excepted by name below, and run_scenario at most 60. A brace matcher over the source with
comments and literals blanked: a body opened after ')' (and qualifiers) where a function
may stand is a function; lambdas count toward the function they sit in."""
import argparse
import pathlib
import re
import sys

LIMIT = 120
LIMITS = {"run_scenario": 60}
# Functions that are tables of data (one entry per command, kind, ...), not logic.
DATA_TABLES = {"commands"}


def blank(text):
    """Comments, string and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 3'600'000
            out.append(c)
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    text = blank(path.read_text())
    stack = []  # ("fn"|"scope"|"other", start offset, name)
    header_start = 0
    found = []
    for i, c in enumerate(text):
        if c == "{":
            in_fn = any(k == "fn" for k, _, _ in stack)
            header = text[header_start:i]
            kind = "other"
            if not in_fn:
                h = " ".join(header.split())
                if re.search(r"\b(namespace|class|struct|enum|union)\b", h) and "(" not in h.split("{")[0][:h.find(":") if ":" in h else len(h)]:
                    kind = "scope"
                elif "(" in h and "=" not in h.split("(")[0] and re.search(r"\)\s*(const|override|final|noexcept|mutable|->[^;{]*|:[^;{]*)*\s*$", h):
                    kind = "fn"
                elif re.search(r'extern\s*"?C?"?\s*$', h):
                    kind = "scope"
            name = ""
            if kind == "fn":
                m = re.findall(r"([~\w:]+)\s*\(", header.split("(")[0] + "(")
                name = m[-1].split("::")[-1] if m else "?"
            stack.append((kind, i, name))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "fn":
                    first = text.count("\n", 0, start) + 1
                    last = text.count("\n", 0, i) + 1
                    found.append((name, first, last - first + 1))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=".")
    a = ap.parse_args()
    root = pathlib.Path(a.source) / "orchestrator"
    bad = []
    count = 0
    for p in sorted(root.rglob("*")):
        if p.suffix not in (".cc", ".h"):
            continue
        for name, line, length in functions(p):
            count += 1
            limit = LIMITS.get(name, LIMIT)
            if name in DATA_TABLES:
                continue
            if length > limit:
                bad.append(f"{p.relative_to(a.source)}:{line}: {name} is {length} lines (limit {limit})")
    print(f"{count} functions checked", file=sys.stderr)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
