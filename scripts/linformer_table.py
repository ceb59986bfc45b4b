#!/usr/bin/env python3
"""linformer_table.py — Linformer against full attention per n at one k, measured by
nnbench, beside the Linformer paper's efficiency table (docs/attention.md).

It writes an experiment derived from samples/attention-scaling.ini (its [experiment],
[data], [model], [train] and [profile] sections as they are; the variants full-nN and
linformer-nN for the sizes asked, with linformer:k=K), runs it with `nnbench run` into a
scratch database (or reads the newest batch of --db without running), takes the scaling
view of the batch (`nnbench compare --last-batch --json`: step time, attention time,
attention memory and peak memory per n, store/scaling.c) and prints a Markdown table of
the ratios full / Linformer per n next to the paper's figures for the same k, with when,
where and under what load it was measured.

  linformer_table.py [--nnbench BIN] [--k 128|256|512|1024|2048] [--sizes 256,512,...]
                     [--db FILE [--no-run]]

Exit status: 0 table printed; 1 a run or the comparison failed; 2 bad usage.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(TOP, "samples", "attention-scaling.ini")

# Wang et al. 2020, "Linformer: Self-Attention with Linear Complexity", arXiv:2006.04768,
# section 5.3, Table 3: inference-time efficiency of Linformer (layerwise sharing) over a
# standard Transformer on a 16 GB Tesla V100, a full forward pass, batch size the largest
# that fits in memory; "time saved" (left) and "memory saved" (right, the ratio of those
# batch sizes), as printed there: columns k = 128, 256, 512, 1024, 2048.
PAPER_K = [128, 256, 512, 1024, 2048]
PAPER_TIME = {
    512: "1.5x 1.3x - - -", 1024: "1.7x 1.6x 1.3x - -", 2048: "2.6x 2.4x 2.1x 1.3x -",
    4096: "3.4x 3.2x 2.8x 2.2x 1.3x", 8192: "5.5x 5.0x 4.4x 3.5x 2.1x", 16384: "8.6x 7.8x 7.0x 5.6x 3.3x",
    32768: "13x 12x 11x 8.8x 5.0x", 65536: "20x 18x 16x 14x 7.9x",
}
PAPER_MEM = {
    512: "1.7x 1.5x - - -", 1024: "3.0x 2.9x 1.8x - -", 2048: "6.1x 5.6x 3.6x 2.0x -",
    4096: "14x 13x 8.3x 4.3x 2.3x", 8192: "28x 26x 17x 8.5x 4.5x", 16384: "56x 48x 32x 16x 8x",
    32768: "56x 48x 36x 18x 16x", 65536: "60x 52x 40x 20x 18x",
}


def derived_ini(k, sizes):
    """The sample's base sections with variants full-nN and linformer-nN (k = K)."""
    text = open(SAMPLE, encoding="utf-8").read()
    cut = text.find("\n[variant ")
    if cut < 0:
        sys.exit("linformer_table.py: %s has no [variant ...] sections" % SAMPLE)
    out = [text[:cut + 1]]
    for n in sizes:
        out.append("[variant full-n%d]\ndata.seq_len = %d\nmodel.attention = full\n\n" % (n, n))
        out.append("[variant linformer-n%d]\ndata.seq_len = %d\nmodel.attention = linformer:k=%d\n\n" % (n, n, k))
    return "".join(out)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout[-2000:] + p.stderr[-2000:])
        sys.exit("linformer_table.py: failed (%d): %s" % (p.returncode, " ".join(cmd)))
    return p.stdout


def cpu_model():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit():
    p = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return p.stdout.strip() or "unknown"


def ratio(a, b):
    if a is None or b is None or not a > 0 or not b > 0:
        return "-"
    return "%.1fx" % (a / b) if a / b < 100 else "%.0fx" % (a / b)


def paper(table, n, k):
    row = table.get(n)
    return row.split()[PAPER_K.index(k)] if row and k in PAPER_K else "-"


def linformer_k(report):
    """k of the batch's Linformer runs, from their stored config."""
    ks = set()
    for r in report.get("runs", []):
        m = re.search(r"linformer:k=(\d+)", (r.get("params") or {}).get("model.attention", ""))
        if m:
            ks.add(int(m.group(1)))
    return ks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnbench", default=os.path.join(TOP, "build", "nnbench"))
    ap.add_argument("--k", type=int, default=128, help="Linformer k (the paper's columns: %s)" % PAPER_K)
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--db", help="database to write (default: a scratch one) or, with --no-run, to read")
    ap.add_argument("--no-run", action="store_true", help="read the newest batch of --db, run nothing")
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        ap.error("--sizes wants numbers separated by commas, got '%s'" % a.sizes)
    if a.no_run and not a.db:
        ap.error("--no-run reads --db: name the database")
    if a.k < 1 or any(n < 2 for n in sizes):
        ap.error("--k and every size must be positive")
    scratch = tempfile.mkdtemp(prefix="linformer-table-")
    try:
        return table(a, sizes, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def table(a, sizes, scratch):
    load0 = os.getloadavg()
    db = a.db or os.path.join(scratch, "scaling.db")
    if not a.no_run:
        ini = os.path.join(scratch, "linformer-k%d.ini" % a.k)
        with open(ini, "w", encoding="utf-8") as f:
            f.write(derived_ini(a.k, sizes))
        run([a.nnbench, "run", ini, "--db", db])
    load1 = os.getloadavg()
    rep = json.loads(run([a.nnbench, "compare", "--last-batch", "--json", "--db", db]))
    sc = rep.get("scaling")
    if not sc:
        sys.exit("linformer_table.py: the newest batch of %s holds one size only: no scaling view" % db)
    series = {s["label"]: {p["x"]: p for p in s["points"]} for s in sc["series"]}
    if "full" not in series or "linformer" not in series:
        sys.exit("linformer_table.py: the batch needs variants full-nN and linformer-nN (has %s)" % sorted(series))
    ks = linformer_k(rep)
    k = ks.pop() if len(ks) == 1 else a.k
    ncpu = os.cpu_count() or 1
    loaded = max(load0[0], load1[0]) > 0.5 * ncpu
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print("Measured %s on %s (%s, %d CPUs), nnbench %s; load average %.1f before, %.1f after%s." % (
        when, platform.node(), cpu_model(), ncpu, commit(), load0[0], load1[0],
        ": a LOADED machine, the times show the shape only" if loaded else ""))
    print("Linformer k = %d, one encoder layer (samples/attention-scaling.ini), a training step at batch 1, "
          "1 thread. Ratios full / Linformer; the paper's at the same k (Wang et al. 2020, Table 3).\n" % k)
    print("| n | step time | attention time | attention memory | peak memory | paper: time saved | paper: memory saved |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    full, lin = series["full"], series["linformer"]
    for n in sorted(set(full) & set(lin)):
        f, l = full[n], lin[n]
        print("| %d | %s | %s | %s | %s | %s | %s |" % (
            n, ratio(f["step_s"], l["step_s"]), ratio(f["attn_s"], l["attn_s"]),
            ratio(f["attn_bytes"], l["attn_bytes"]), ratio(f["peak_bytes"], l["peak_bytes"]),
            paper(PAPER_TIME, int(n), k), paper(PAPER_MEM, int(n), k)))
    ex = {lab: s["exponents"] for lab, s in ((s["label"], s) for s in sc["series"])}
    print("\nFitted exponents (log-log): full attention time %s, memory %s; Linformer attention time %s, memory %s." % (
        fmt(ex["full"]["attn_s"]), fmt(ex["full"]["attn_bytes"]), fmt(ex["linformer"]["attn_s"]),
        fmt(ex["linformer"]["attn_bytes"])))
    return 0


def fmt(v):
    return "-" if v is None else "%.2f" % v


if __name__ == "__main__":
    sys.exit(main())
