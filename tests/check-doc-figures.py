#!/usr/bin/env python3
"""check-doc-figures.py ROOT - README's performance figures are the benchmark tables'.

A figure in README.md is followed, on the same line, by a marker that says where it comes
from (an HTML comment, so the rendered page does not show it):

    overwrites take 0.85x to 1.71x <!-- bench: BENCHMARKS.md#HEADING ;; ROWS ;; VALUE ;; SAYS -->

(";;" separates the fields: a "|" would split a Markdown table's cell.)

  HEADING  a heading of docs/BENCHMARKS.md (or BENCHMARKS-FS.md), without its #s, or a
           paragraph's leading **bold** words; the table is the first one after it;
  ROWS     a Python condition on `row` (cells by column title, and num/paren as below),
           or * for every row;
  VALUE    a Python expression per row: num("column") is the cell's first number,
           paren("column") the number in its parentheses;
  SAYS     what the text must say, with {min} and {max} over the rows, or {v} when one
           row matches; a format spec may follow (e.g. {v:.0f}); numbers are rounded as
           shown. The rendered SAYS must appear on the line before the marker.

The script fails on a figure that no longer matches its table, on a marker whose table or
rows are gone, and on a line of README (outside code blocks) with a ratio ("1.5x") or a
time in microseconds ("42 µs") but no marker, or with a percentage in its performance
section ("### Speed").
"""
import os
import re
import sys

MARK = re.compile(r"<!-- bench: (.+?)#(.+?) ;; (.+?) ;; (.+?) ;; (.+?) -->")
NUM = re.compile(r"-?\d+(?:\.\d+)?")


def tables(path):
    """heading -> (columns, rows) of the first table after each heading."""
    out, heading, cols, rows = {}, None, None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"^#+ (.*)$", line) or re.match(r"^\*\*(.+?)\*\*", line)
            if m and not line.startswith("|"):
                heading, cols, rows = m.group(1).strip(), None, None
                continue
            if not line.startswith("|") or heading is None or heading in out and cols is None:
                if cols is not None:
                    out.setdefault(heading, (cols, rows))
                    cols = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cols is None:
                cols, rows = cells, []
            elif all(re.match(r"^:?-+:?$", c) for c in cells):
                continue
            else:
                rows.append(dict(zip(cols, cells)))
    if cols is not None and heading is not None:
        out.setdefault(heading, (cols, rows))
    return out


def number(cell, paren=False):
    if paren:
        m = re.search(r"\((-?\d+(?:\.\d+)?)\)", cell)
    else:
        m = NUM.search(cell)
    if not m:
        raise ValueError("no number in cell %r" % cell)
    return float(m.group(1) if paren else m.group(0))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    docs, cache, problems, checked = os.path.join(root, "docs"), {}, [], 0
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read().split("\n")
    section, code = None, False
    for i, line in enumerate(readme, 1):
        if line.startswith("```"):
            code = not code
        if code:
            continue
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        marks = list(MARK.finditer(line))
        figure = r"\d(\.\d+)?x\b|\d+(\.\d+)? ?µs" + (r"|\d+ ?%" if section == "Speed" else "")
        if not marks and re.search(figure, line):
            problems.append("README.md:%d: a figure without a bench marker: %s" % (i, line.strip()))
        for m in marks:
            where = "README.md:%d" % i
            fname, heading, cond, expr, says = (g.strip() for g in m.groups())
            if fname not in cache:
                cache[fname] = tables(os.path.join(docs, fname))
            if heading not in cache[fname]:
                problems.append("%s: no table under '%s' in docs/%s" % (where, heading, fname))
                continue
            _, rows = cache[fname][heading]
            try:
                def env(r):
                    return {"row": r, "num": lambda c: number(r[c]),
                            "paren": lambda c: number(r[c], True)}
                picked = [r for r in rows if cond == "*" or eval(cond, {}, env(r))]
                values = [eval(expr, {}, env(r)) for r in picked]
            except (KeyError, ValueError, SyntaxError) as e:
                problems.append("%s: %s: %s" % (where, expr, e))
                continue
            if not values:
                problems.append("%s: no row of '%s' matches %s" % (where, heading, cond))
                continue
            if "{v" in says and len(values) != 1:
                problems.append("%s: {v} needs one row, %d match %s" % (where, len(values), cond))
                continue
            spec = re.sub(r"\{(min|max|v)\}", r"{\1:.2f}", says)  # bare: as the tables print
            text = spec.format(min=min(values), max=max(values), v=values[0])
            before = line[:m.start()]
            if text not in before:
                problems.append("%s: the table says '%s' (%s in docs/%s), the text does not: %s"
                                % (where, text, heading, fname, before.strip()[-100:]))
            checked += 1
    for p in problems:
        print("FAIL: " + p)
    print("%s: %d figures in README.md checked against the benchmark tables"
          % ("PASS" if not problems and checked else "FAIL", checked))
    return 0 if not problems and checked else 1


if __name__ == "__main__":
    sys.exit(main())
