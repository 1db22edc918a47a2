#!/usr/bin/env python3
"""check-doc-output.py DOC NAME -- COMMAND... - a table in the docs is what a test prints.

Runs COMMAND (a test), which must pass, and requires that the block of DOC between
<!-- output: NAME --> and <!-- /output --> holds, line for line, the lines the test printed
from the first that starts the block's first line's text to as many lines as the block has.
So a published table (fault outcomes, a scribble sweep) is the test's own output, and a
change of behaviour that forgets the docs fails here with both versions shown.
The command's exit status is passed on when it fails.
"""
import re
import subprocess
import sys


def block(doc, name):
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"<!-- output: %s -->\n```[a-z]*\n(.*?)```\n<!-- /output -->" % re.escape(name), text,
                  re.S)
    if not m:
        sys.exit("FAIL: %s has no block <!-- output: %s --> ... <!-- /output --> around a code fence"
                 % (doc, name))
    return m.group(1).rstrip("\n").split("\n")


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: check-doc-output.py DOC NAME -- COMMAND...")
    doc, name, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
    want = block(doc, name)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        print("FAIL: the test itself failed (exit %d)" % run.returncode)
        return run.returncode
    got = [l.rstrip() for l in run.stdout.split("\n")]
    start = next((i for i, l in enumerate(got) if l == want[0].rstrip()), None)
    if start is None:
        print("FAIL: %s (%s): the test no longer prints the block's first line:\n  %s"
              % (doc, name, want[0]))
        return 1
    printed = got[start:start + len(want)]
    if printed != [l.rstrip() for l in want]:
        print("FAIL: %s (%s) differs from what the test prints; the docs say:" % (doc, name))
        print("\n".join("  " + l for l in want))
        print("the test printed:")
        print("\n".join("  " + l for l in printed))
        return 1
    print("docs: %s (%s): %d lines as the test prints them" % (doc, name, len(want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
