#!/usr/bin/env python3
"""workbench_shots.py — the screenshots of docs/workbench.md, taken from the real workbench.

Stores three runs in a scratch database (spirals-mlp sgd for 20 epochs, profiled; adam;
newton-vs-sgd newton; one BLAS thread), drives `nnbench tui` in a private tmux server at 100x32 and captures
each screen with `tmux capture-pane -p`. Trailing blanks are dropped, runs of blank lines
are shortened to one, and a long screen is cut where the page says (a line "   ⋮").

In docs/workbench.md each screenshot is the ```text block after a marker line
    <!-- screen: NAME (scripts/workbench_shots.py) -->
and NAME is one of SCREENS below.

  workbench_shots.py [--nnbench BIN] [--update | --check]

Without options it prints every screen. --update writes them into docs/workbench.md (then
review the diff: times and losses follow the machine). --check compares each one with the
page in shape (scripts/doc_examples.py: the same lines and words, numbers free; the self %
bars, which follow the times, left out) and exits
1 when one differs. Needs tmux. Exit status 2: bad usage or no tmux.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import doc_examples  # noqa: E402  (the shape comparison of example outputs)

COLS, ROWS = 100, 32
DOC = os.path.join(TOP, "docs", "workbench.md")
BAR = re.compile("[\u2580-\u259f]")
MARK = re.compile(r"^<!-- screen: (\S+) \(scripts/workbench_shots\.py\) -->$")


class Tui:
    """The workbench in a tmux server of its own (socket nnbench-shots-PID)."""

    def __init__(self, nnbench, db, cwd):
        self.sock = "nnbench-shots-%d" % os.getpid()
        self.t = ["tmux", "-L", self.sock, "-f", "/dev/null"]
        cmd = "NNBENCH_DB= TERM=screen '%s' tui --db '%s'; echo NNBENCH-EXIT=$?; sleep 60" % (nnbench, db)
        subprocess.run(self.t + ["new-session", "-d", "-s", "t", "-n", "w", "-x", str(COLS), "-y", str(ROWS),
                                 "-c", cwd, cmd], check=True)
        subprocess.run(self.t + ["set", "-g", "escape-time", "0"], check=True, stdout=subprocess.DEVNULL)

    def cap(self):
        return subprocess.run(self.t + ["capture-pane", "-p", "-t", "w"], check=True, capture_output=True,
                              text=True).stdout

    def keys(self, *k):
        subprocess.run(self.t + ["send-keys", "-t", "w"] + list(k), check=True)

    def wait(self, text, gone=False, limit=60.0):
        end = time.time() + limit
        while time.time() < end:
            if (text in self.cap()) != gone:
                time.sleep(0.3)   # let the frame settle (a redraw in progress)
                return
            time.sleep(0.1)
        raise SystemExit("workbench_shots.py: timed out waiting for %r%s\n%s" % (
            text, " to go" if gone else "", self.cap()))

    def go(self, keys, text):
        """Sends keys, then waits for text."""
        self.keys(*keys)
        self.wait(text)

    def close(self):
        subprocess.run(self.t + ["kill-server"], stderr=subprocess.DEVNULL)


def tidy(screen, cut=None):
    """Trailing blanks dropped, blank runs shortened to one, cut after `cut` lines."""
    out = []
    for line in screen.rstrip("\n").split("\n"):
        line = line.rstrip()
        if not line and out and not out[-1]:
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    if cut and len(out) > cut:
        out = out[:cut] + ["   ⋮"]
    return "\n".join(out)


def store_runs(nnbench, db, cwd):
    runs = [["samples/spirals-mlp.ini", "--variant", "sgd", "--set", "train.epochs=20",
             "--set", "profile.enabled=true"],
            ["samples/spirals-mlp.ini", "--variant", "adam"],
            ["samples/newton-vs-sgd.ini", "--variant", "newton"]]
    # one BLAS thread: the Profile tab's warnings then do not follow the machine's load
    # (cpu below 1 is a warning only for a threaded GEMM)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for r in runs:
        subprocess.run([nnbench, "run"] + r + ["--db", db], cwd=cwd, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def take(nnbench):
    """Every screen, by name."""
    shots = {}
    tmp = tempfile.mkdtemp(prefix="nnbench-shots-")
    db = os.path.join(tmp, "d.db")
    # the workbench runs in the scratch directory on "d.db": its title names no temporary path
    tui = Tui(nnbench, "d.db", tmp)
    try:
        tui.wait("No runs in this database yet.")
        shots["empty"] = tidy(tui.cap())
        tui.keys("q")
        tui.wait("NNBENCH-EXIT=")
        tui.close()
        store_runs(nnbench, db, TOP)
        tui = Tui(nnbench, "d.db", tmp)
        tui.wait("3/3 runs")
        shots["runs"] = tidy(tui.cap())
        tui.go(["o"], "sort the runs by")
        shots["sort-picker"] = tidy(tui.cap())
        tui.keys("Escape")
        tui.wait("sort the runs by", gone=True)
        tui.go(["/", "sp"], "filter: sp")
        shots["filter"] = tidy(tui.cap())
        tui.go(["Escape"], "3/3 runs")
        # run 3 (newton): the first row, ids descending; its Curves, then Solver
        tui.go(["Home", "Enter"], "#3 newton-vs-sgd/newton")
        tui.wait("train loss")
        shots["curves"] = tidy(tui.cap())
        tui.go(["3"], "kappa used (log)")
        shots["solver"] = tidy(tui.cap())
        tui.go(["Escape"], "3/3 runs")
        # run 1 (sgd, profiled): the last row; its Profile sorted by name with the picker
        # (the same rows in the same order on any machine), Config, System
        tui.go(["End", "Enter"], "#1 spirals-mlp/sgd")
        tui.go(["2"], "sorted by self")
        tui.go(["o"], "sort the ops by")
        tui.go(["j"] * 7 + ["Enter"], "sorted by name")
        shots["profile"] = tidy(tui.cap())
        tui.go(["4"], "Resolved configuration")
        shots["config"] = tidy(tui.cap(), cut=14)
        tui.go(["5"], "System:")
        shots["system"] = tidy(tui.cap())
        tui.go(["Escape"], "3/3 runs")
        tui.go(["n"], "Start a run:")
        shots["newrun"] = tidy(tui.cap())
        tui.go(["Escape"], "3/3 runs")
        tui.go(["?"], "Keys on the Runs screen")
        shots["help"] = tidy(tui.cap(), cut=14)
        tui.go(["Escape"], "3/3 runs")
        tui.go(["q"], "NNBENCH-EXIT=")
    finally:
        tui.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return shots


def unbar(lines):
    """The lines without block elements (the Profile tab's self % bars follow the times)."""
    return [BAR.sub(" ", x) for x in lines]


def doc_blocks(lines):
    """(name, first, end) of each marked block: lines[first:end] is its text."""
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or lines[i + 1] != "```text":
            raise SystemExit("workbench_shots.py: %s line %d: the marker is not followed by a ```text block"
                             % (DOC, i + 1))
        end = lines.index("```", i + 2)
        out.append((m.group(1), i + 2, end))
    return out


def main(argv):
    nnbench, mode = os.path.join(TOP, "build", "nnbench"), None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--nnbench" and args:
            nnbench = os.path.abspath(args.pop(0))
        elif a in ("--update", "--check"):
            mode = a
        else:
            sys.stderr.write(__doc__)
            return 2
    if not shutil.which("tmux"):
        sys.stderr.write("workbench_shots.py: tmux is not installed\n")
        return 2
    shots = take(nnbench)
    if not mode:
        for name, text in shots.items():
            print("== %s\n%s\n" % (name, text))
        return 0
    lines = open(DOC, encoding="utf-8").read().split("\n")
    blocks = doc_blocks(lines)
    bad = 0
    for name, first, end in reversed(blocks):
        if name not in shots:
            raise SystemExit("workbench_shots.py: %s names a screen '%s' this script does not take" % (DOC, name))
        new = shots[name].split("\n")
        if mode == "--update":
            lines[first:end] = new
        elif doc_examples.matches(unbar(lines[first:end]), unbar(new)) is not None:
            bad += 1
            print("workbench_shots.py: screen '%s' differs from %s:\n--- page\n%s\n--- now\n%s\n"
                  % (name, DOC, "\n".join(lines[first:end]), shots[name]))
    if mode == "--update":
        open(DOC, "w", encoding="utf-8").write("\n".join(lines))
        print("workbench_shots.py: %d screens written into %s" % (len(blocks), DOC))
    else:
        print("workbench_shots.py: %d of %d screens as on the page" % (len(blocks) - bad, len(blocks)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
