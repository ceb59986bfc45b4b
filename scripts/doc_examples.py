#!/usr/bin/env python3
"""doc_examples.py — the example outputs in README.md and docs/*.md, run and checked.

An example is a fenced block whose lines starting with "$ " are commands; the lines after
each command, up to the next "$ " line or the end of the block, are its output as shown.
Every example is run (sh -c, in one scratch directory per page, in page order, so a page's
later examples see the runs its earlier ones stored) and its real output compared with the
shown one, *in shape*: the same lines with the same words, where every number may differ
(timings, and losses on another BLAS core) and so may its unit ("52 ms" = "2.1 s"), a word
cut to fit a column ("DATA…" = "DATAS…") and absolute paths (a cache directory); of a
chart's rows only the axis is compared (braille cells, marks and the number of x ticks
follow the data), and a line
"..." stands for any number of lines. So a renamed column, a lost table or a new line in
the real output fails the check; a faster machine does not.

Markers, an HTML comment on the line(s) just before a fenced block:
  <!-- example-setup: CMD -->   run CMD (sh -c, scratch directory) before the block
  <!-- example-file: NAME -->   the block (an .ini, say) is written to NAME, not run
  <!-- unchecked: REASON -->    the block is shown but not run (say why: a benchmark, ...)

In the scratch directory `nnbench` and `./nnbench` are the binary under test, and
`samples`, `build` and `tests` point into the repository.

  doc_examples.py [--update] [--nnbench BIN] [FILE.md ...]   (default README.md docs/*.md)

--update writes each example's real output into the page (then review the diff).
Exit status: 0 all examples match, 1 some differ (each is printed), 2 bad usage.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = re.compile(r"<!--\s*(example-setup|example-file|unchecked):\s*(.*?)\s*-->")
# A number, with what can stick to it in nnbench's output: a sign, thousands separators,
# an exponent, a unit (ms, us, µs, s, KiB, GB/s, x, %), a clock like 12h12m or 1:23.
NUM = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
UNIT = r"(?:[a-zA-Zµ/%]{0,4})"
NUMTOK = re.compile(r"^[(<>=~]*(?:" + NUM.pattern + UNIT + r")+(?:[:/](?:" + NUM.pattern + UNIT + r"))*[),;]*$")
BRAILLE = re.compile("[\u2800-\u28ff]")
TIMEOUT_S = 600


# A unit printed apart from its number ("52 ms", "2.1 s", "7.1 MiB"): a duration or size
# is one quantity whichever unit the machine's speed picked.
UNITWORD = {"ns", "us", "µs", "ms", "s", "B", "KiB", "MiB", "GiB"}


def word(t):
    if NUMTOK.match(t):
        return "#"
    if t.startswith("/"):
        return "<path>"
    if t.endswith("…") and len(t) > 2:
        # a word cut to fit a column: how much survives depends on the other columns'
        # widths (numbers), so only its start is compared
        return t[:2] + "…"
    return t


def shape(line):
    """The words of a line with every number (and a unit after it) as '#', cut words by
    their start, and braille chart cells dropped."""
    line = BRAILLE.sub(" ", line)
    axis = re.match(r"^([^┤│└]*)([┤│└])", line)
    if axis:
        # a row of a text chart: the plotted marks follow the data; only the axis label
        # (a number) and the axis are compared
        return shape(axis.group(1)) + " " + axis.group(2)
    out = []
    for t in line.split():
        w = word(t)
        bare = t.rstrip(",;)")
        if bare in UNITWORD and out and out[-1] == "#":
            out[-1] = "#" + t[len(bare):]   # "3.01 ms," = "834 us,"
            continue
        out.append(w)
    return " ".join(out)


def shapes(lines):
    """shape() of each line; the tick labels under a chart's x axis (the line after the
    one with └) as one '#' for all their numbers: how many ticks fit follows the data."""
    out = []
    for i, x in enumerate(lines):
        sh = shape(x)
        if i and "└" in lines[i - 1]:
            sh = re.sub(r"# (?:# )*", "# ", sh + " ").strip()
        out.append(sh)
    return out


def matches(shown, real):
    """shown (with '...' lines) against real, line shapes; returns None or the first mismatch."""
    want = shapes(shown)
    got = shapes(real)

    def walk(i, j):
        while i < len(want):
            if want[i] == "...":
                if i + 1 == len(want):
                    return None
                for k in range(j, len(got) + 1):
                    if walk(i + 1, k) is None:
                        return None
                return (i, j)
            if j >= len(got) or got[j] != want[i]:
                return (i, j)
            i += 1
            j += 1
        return None if j == len(got) else (i, j)

    return walk(0, 0)


def blocks(path):
    """(start, end, info, markers, lines) per fenced block; start/end index the fences."""
    text = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(text):
        if text[i].startswith("```"):
            j = i + 1
            while j < len(text) and not text[j].startswith("```"):
                j += 1
            marks, k = [], i - 1
            while k >= 0 and MARK.search(text[k]):
                marks.insert(0, MARK.search(text[k]).groups())
                k -= 1
            out.append((i, j, text[i][3:].strip(), marks, text[i + 1:j]))
            i = j + 1
        else:
            i += 1
    return text, out


def examples(lines):
    """[(command, [shown output lines])] of one block."""
    ex = []
    for line in lines:
        if line.startswith("$ "):
            ex.append((line[2:], []))
        elif ex:
            ex[-1][1].append(line)
    return ex


def scratch_dir(nnbench):
    d = tempfile.mkdtemp(prefix="nnbench-docs.")
    os.mkdir(os.path.join(d, "bin"))
    os.symlink(nnbench, os.path.join(d, "bin", "nnbench"))
    os.symlink(nnbench, os.path.join(d, "nnbench"))
    for name in ("samples", "build", "tests"):
        os.symlink(os.path.join(TOP, name), os.path.join(d, name))
    return d


def run(cmd, cwd):
    env = dict(os.environ)
    env["PATH"] = os.path.join(cwd, "bin") + os.pathsep + env.get("PATH", "")
    for k in ("NNBENCH_DB", "COLUMNS", "LINES"):
        env.pop(k, None)
    env["NO_COLOR"] = "1"
    p = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
    return p.stdout.decode("utf-8", "replace").rstrip("\n").split("\n")


def page(path, nnbench, update):
    """Checks (or updates) one page; returns the number of examples that differ."""
    text, found = blocks(path)
    rel = os.path.relpath(path, TOP)
    d = scratch_dir(nnbench)
    bad, edits = 0, []
    try:
        for start, end, info, marks, lines in found:
            kinds = dict(marks)
            if "unchecked" in kinds:
                continue
            for kind, arg in marks:
                if kind == "example-setup":
                    run(arg, d)
            if "example-file" in kinds:
                with open(os.path.join(d, kinds["example-file"]), "w") as f:
                    f.write("\n".join(lines) + "\n")
                continue
            ex = examples(lines)
            if not ex:
                continue
            new = []
            for cmd, shown in ex:
                real = run(cmd, d)
                new += ["$ " + cmd] + real
                where = matches(shown, real)
                if where is not None and not update:
                    bad += 1
                    i, j = where
                    print(f"{rel}:{start + 1}: `{cmd}`: output differs from the page"
                          f" (shown line {i + 1}, real line {j + 1})")
                    print("  shown: " + (shown[i] if i < len(shown) else "(end)"))
                    print("  real:  " + (real[j] if j < len(real) else "(end)"))
            edits.append((start, end, new))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if update and edits:
        for start, end, new in reversed(edits):
            text[start + 1:end] = new
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(text))
    return bad


def main(argv):
    update, nnbench, files = False, os.path.join(TOP, "build", "nnbench"), []
    it = iter(argv)
    for a in it:
        if a == "--update":
            update = True
        elif a == "--nnbench":
            nnbench = os.path.abspath(next(it, ""))
        elif a.startswith("-"):
            print(f"doc_examples.py: unknown option {a}\n" + __doc__.split("\n\n")[-2], file=sys.stderr)
            return 2
        else:
            files.append(os.path.abspath(a))
    if not os.access(nnbench, os.X_OK):
        print(f"doc_examples.py: {nnbench} is not an executable (build it with make)", file=sys.stderr)
        return 2
    if not files:
        docs = os.path.join(TOP, "docs")
        files = [os.path.join(TOP, "README.md")] + sorted(
            os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    bad = sum(page(f, nnbench, update) for f in files)
    if not update:
        print(f"doc examples: {bad} differ" if bad else "doc examples: all match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
