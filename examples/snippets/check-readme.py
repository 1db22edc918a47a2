#!/usr/bin/env python3
"""check-readme.py README SNIPPETS BUILT KERATIN_DIR - the README's code works as printed.

Every ```c block of README must be, byte for byte, one of the files in SNIPPETS (and every
file there must appear): a reader who pastes a block gets a program that builds. Each
program (BUILT/snippet-NAME) then runs twice in a scratch directory, with the file name
it defaults to: the first run creates its file, the second reopens it; both must succeed,
and what they leave must pass `keratin check` or `keratin region check`. A ```sh block
whose every command starts with `keratin ` is run too, in a scratch directory with
KERATIN_DIR on PATH; the other shell blocks (make targets) are shown, not run.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def blocks(text):
    """(language, body) for every fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)


def run(cmd, cwd, env, what):
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d\n%s%s" % (what, p.returncode, p.stdout, p.stderr))
    return p.stdout


def main():
    readme, snipdir, built, kdir = [os.path.abspath(a) for a in sys.argv[1:5]]
    text = open(readme).read()
    files = {f: open(os.path.join(snipdir, f)).read()
             for f in sorted(os.listdir(snipdir)) if f.endswith(".c")}
    used, shell_run, shell_shown = set(), 0, 0
    env = dict(os.environ, PATH=kdir + os.pathsep + os.environ.get("PATH", ""))
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None

    for lang, body in blocks(text):
        if lang == "c":
            match = [f for f, src in files.items() if src == body]
            if not match:
                sys.exit("FAIL: a C block of %s is not any file of %s verbatim:\n%s"
                         % (readme, snipdir, body[:300]))
            used.add(match[0])
        elif lang == "sh":
            cmds = [l for l in body.splitlines() if l.strip() and not l.startswith("#")]
            if not all(c.startswith("keratin ") for c in cmds):
                shell_shown += 1
                continue
            with tempfile.TemporaryDirectory(prefix="kr-readme-", dir=base) as d:
                for c in cmds:
                    run(["sh", "-c", c], d, env, "README command '%s'" % c)
            shell_run += 1
    missing = sorted(set(files) - used)
    if missing:
        sys.exit("FAIL: %s not in %s" % (", ".join(missing), readme))

    # What each program leaves, and the keratin command that judges it.
    judge = {"bank": ["keratin", "check", "bank.pool"],
             "maps": ["keratin", "check", "maps.pool"],
             "hmap": ["keratin", "region", "check", "sessions.map"],
             "region": ["keratin", "region", "check", "store.dat"],
             "counter": ["keratin", "check", "counter.pool"]}
    for f in sorted(files):
        name = f[:-2]
        exe = os.path.join(built, "snippet-" + name)
        with tempfile.TemporaryDirectory(prefix="kr-readme-", dir=base) as d:
            first = run([exe], d, env, f + " (first run)")
            second = run([exe], d, env, f + " (second run)")
            if name in judge:
                run(judge[name], d, env, "%s after %s" % (" ".join(judge[name]), f))
            if name == "bank" and (first.strip() != "balances: 900 100" or
                                   second.strip() != "balances: 800 200"):
                sys.exit("FAIL: bank.c printed %r then %r" % (first, second))
            if name == "counter" and second.strip() != "runs: 2, last note: written by run 2":
                sys.exit("FAIL: counter.c printed %r then %r" % (first, second))
    print("PASS: %d C blocks verbatim from %s, each run twice and checked; %d keratin "
          "command block(s) run, %d shell block(s) shown only" % (len(files), snipdir, shell_run,
                                                                 shell_shown))


if __name__ == "__main__":
    main()
