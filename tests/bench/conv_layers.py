#!/usr/bin/env python3
"""conv_layers.py: per-conv-layer time of each convolution algorithm on a model (issue 24).

Runs the experiment briefly once per value of model.conv_algo (the list is read from
`nnbench run --keys`, so an algorithm added there appears here without an edit), each run
into a scratch database, and prints one Markdown table: a row per conv layer, a column per
algorithm, each cell the layer's forward + backward milliseconds per step from the stored op
rows (`nnbench show last --json`: conv2d.fwd and conv2d.bwd of the layer, their total time,
which holds the algorithm's transform scopes, over their calls), then what `auto` picked
per layer. A cell whose layer could not run the algorithm says what ran instead, as the
model summary does: "41.0 (im2col)"; the auto column names its pick in every cell.

  conv_layers.py [--nnbench build/nnbench] [--ini samples/resnet-fashion.ini]
                 [--steps 20] [--n 2000] [--algos a,b,...] [--stat mean|min] [--set KEY=VALUE ...]

--stat min takes each op's fastest call instead of the mean (steadier on a loaded machine).
The test set is cut to one batch (data.n_test = train.batch) so that evaluation adds one
forward call at the training batch size. Exit status: 0, 1 when a run failed, 2 on usage.
Stdlib only: any python3 runs it.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def die(msg, code=1):
    print(f"conv_layers: {msg}", file=sys.stderr)
    sys.exit(code)


def algorithms(nnbench):
    """The values of model.conv_algo, as `nnbench run --keys` lists them."""
    out = subprocess.run([nnbench, "run", "--keys"], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 2 and cells[1] == "`model.conv_algo`":
            return [a.strip() for a in cells[2].split(",") if a.strip()]
    die(f"{nnbench} run --keys lists no model.conv_algo row (exit {out.returncode}): {out.stderr.strip()[:200]}")


CONV = re.compile(r"conv\((\d+x\d+x\d+->\d+x\d+x\d+)([^()]*(?:\([^()]*\))?[^()]*)\)")


def conv_layers(model, known):
    """[(shape, algorithm run)] per conv layer of a model summary, in order, e.g. from
    'conv(16x28x28->32x14x14 k3 p1 s2 im2col (winograd needs ...))'. A layer of a model that
    asked for im2col names no algorithm (the summary stays as it was before conv_algo)."""
    layers = []
    for m in CONV.finditer(model):
        words = m.group(2).split("(")[0].split()
        geometry = " ".join(w for w in words if re.fullmatch(r"[kps]\d+", w))
        ran = words[-1] if words and words[-1] in known else "im2col"
        layers.append((f"{m.group(1)} {geometry}", ran))
    return layers


def run_one(args, algo, db):
    cmd = [args.nnbench, "run", args.ini, "--db", db, "--variant", args.variant,
           "--set", f"model.conv_algo={algo}", "--set", f"train.max_steps={args.steps}",
           "--set", f"data.n={args.n}", "--set", "train.eval_every=0", "--set", "train.telemetry=false",
           "--set", "profile.enabled=true"]
    batch = None
    for kv in args.set:
        cmd += ["--set", kv]
        if kv.startswith("train.batch="):
            batch = kv.split("=", 1)[1]
    cmd += ["--set", f"data.n_test={batch or args.batch}"]
    print(f"conv_layers: {algo}: {' '.join(cmd)}", file=sys.stderr)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"conv_layers: the {algo} run failed (exit {r.returncode}):\n{r.stderr[-600:]}", file=sys.stderr)
        return None
    s = subprocess.run([args.nnbench, "show", "last", "--db", db, "--json"], capture_output=True, text=True)
    if s.returncode != 0:
        print(f"conv_layers: show of the {algo} run failed: {s.stderr[-300:]}", file=sys.stderr)
        return None
    run = json.loads(s.stdout)["runs"][0]
    per = {}
    for op in run["ops"]:
        if op["name"] in ("conv2d.fwd", "conv2d.bwd") and op["calls"] > 0:
            ns = op["min_ns"] if args.stat == "min" else op["total_ns"] / op["calls"]
            per[op["layer"]] = per.get(op["layer"], 0.0) + ns / 1e6
    return {"model": run["model"], "ms": per, "samples_per_s": run.get("samples_per_s")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nnbench", default="build/nnbench")
    p.add_argument("--ini", default="samples/resnet-fashion.ini")
    p.add_argument("--variant", default="adam", help="the variant whose other keys the runs take")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--n", type=int, default=2000, help="training images (data.n)")
    p.add_argument("--batch", type=int, default=64, help="the experiment's train.batch (for data.n_test)")
    p.add_argument("--algos", default="", help="comma-separated; default: every model.conv_algo value")
    p.add_argument("--stat", choices=("mean", "min"), default="mean")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed on to nnbench run")
    args = p.parse_args()
    if args.steps < 1 or args.n < 1:
        die("--steps and --n must be at least 1", 2)
    if not os.access(args.nnbench, os.X_OK):
        die(f"{args.nnbench} is not an executable (build it: make tests, or pass --nnbench PATH)", 2)
    known = algorithms(args.nnbench)
    algos = [a for a in args.algos.split(",") if a] if args.algos else known
    for a in algos:
        if a not in known:
            die(f"--algos: '{a}' is not a value of model.conv_algo ({', '.join(known)})", 2)

    tmp = tempfile.mkdtemp(prefix="nnbench-conv-layers-")
    results, failed = {}, []
    try:
        for a in algos:
            res = run_one(args, a, os.path.join(tmp, f"{a}.db"))
            if res is None:
                failed.append(a)
            else:
                results[a] = res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not results:
        die("every run failed")

    first = results[next(iter(results))]
    layers = conv_layers(first["model"], known)
    names = [f"conv{i + 1}" for i in range(len(layers))]
    cols = [a for a in algos if a in results]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"forward + backward ms per step ({args.stat} per call) of each conv layer, "
          f"{os.path.basename(args.ini)}, {args.steps} steps; ran {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
          f"on {os.uname().nodename} ({os.cpu_count()} CPUs, load average at the end {load}):\n")
    print("| layer | shape | " + " | ".join(cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    totals = {a: 0.0 for a in cols}
    for i, name in enumerate(names):
        cells = []
        for a in cols:
            ms = results[a]["ms"].get(name)
            if ms is None:
                cells.append("-")
                continue
            totals[a] += ms
            ran = conv_layers(results[a]["model"], known)
            tag = ran[i][1] if i < len(ran) else "?"
            cells.append(f"{ms:.2f}" if a == tag else f"{ms:.2f} ({tag})")  # auto: always its pick
        print(f"| {name} | {layers[i][0]} | " + " | ".join(cells) + " |")
    print("| all conv layers | | " + " | ".join(f"{totals[a]:.2f}" for a in cols) + " |")
    print("| run samples/s | | " + " | ".join(f"{results[a]['samples_per_s'] or 0:.0f}" for a in cols) + " |")
    if "auto" in results:
        picks = conv_layers(results["auto"]["model"], known)
        print("\nauto picked: " + ", ".join(f"{names[i]} {picks[i][1]}" for i in range(len(picks))))
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
