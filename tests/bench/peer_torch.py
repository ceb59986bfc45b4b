#!/usr/bin/python3
"""peer_torch.py: the PyTorch peer of `make bench-peers`. It runs the same Fashion-MNIST MLP
(784-256-128-10, ReLU, He-normal weights, zero biases, batch 128, SGD lr 0.05 momentum 0.9,
one epoch, inputs x/255, shuffled every epoch, batches gathered into a preallocated buffer)
as tests/bench/mlp_bench.c, on the same gz IDX files.

  peer_torch.py train [--seed S] [--n-train N] [--n-test N]
      one epoch; prints "RESULT<TAB>torch<TAB>T<TAB>samples/s<TAB>test_acc"
  peer_torch.py train-cnn [--seed S] [--n-train N] [--n-test N]
      one epoch of samples/fashion-mnist-cnn.ini's model (conv 6x5x5 relu, 2x2 max pool,
      conv 16x5x5 relu, pool, dense 64 relu, dense 10; batch 64, SGD lr 0.05 momentum 0.9);
      prints "RESULT<TAB>torch_cnn<TAB>T<TAB>samples/s<TAB>test_acc"
  peer_torch.py train-transformer [--seed S] [--n-train N] [--n-test N]
      one epoch of samples/transformer-fashion.ini's model, variant full (49 4x4 patches of
      16 pixels, embed 64, sinusoidal positions, 2 pre-norm encoder blocks with
      nn.MultiheadAttention (4 heads) and a GELU MLP of 128, layer norm, mean over the
      positions, dense 10; batch 64, Adam lr 0.002);
      prints "RESULT<TAB>torch_transformer<TAB>T<TAB>samples/s<TAB>test_acc"
  peer_torch.py profiler-cost [--reps R] [--n-train N]
      torch.profiler's cost on the same loop (profile_memory=True), off/on interleaved;
      prints "RESULT<TAB>torch_profiler<TAB>median<TAB>min<TAB>max<TAB>loop_off_s<TAB>loop_on_s<TAB>whole_on_s"

Threads: torch.set_num_threads(--threads, default 1). Set OPENBLAS_NUM_THREADS in the
environment for OpenBLAS's own threads: torch.set_num_threads(2) does not reach OpenBLAS and
its OpenMP workers then spin against OpenBLAS's (see /work/shared/BENCH-NOTES.md).
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 128
LR = 0.05
MOMENTUM = 0.9


def read_idx(name, max_n):
    path = os.path.join(DATA, name)
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[2] != 0x08:
        sys.exit(f"peer_torch: {path}: not an IDX file of unsigned bytes")
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * d: 8 + 4 * d], "big") for d in range(dims)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
    if max_n > 0:
        data = data[:max_n]
    return data


def load(prefix, max_n):
    x = read_idx(f"{prefix}-images-idx3-ubyte.gz", max_n).reshape(-1, 784).astype(np.float32) / 255.0
    y = read_idx(f"{prefix}-labels-idx1-ubyte.gz", max_n).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def make_model(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))
    with torch.no_grad():
        for m in model:
            if isinstance(m, torch.nn.Linear):
                # He-normal, std sqrt(2/fan_in), zero bias: the scale the C contenders use.
                m.weight.normal_(0.0, (2.0 / m.in_features) ** 0.5)
                m.bias.zero_()
    return model


def make_cnn(seed):
    """The model of samples/fashion-mnist-cnn.ini, He-normal weights, zero biases."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 28, 28)),
        torch.nn.Conv2d(1, 6, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(256, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))
    with torch.no_grad():
        for m in model:
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5)
                m.bias.zero_()
    return model


class Patches(torch.nn.Module):
    """[B, 784] images -> [B, 49, 16]: 4x4 patches, row-major, each row-major inside
    (nnbench's data.sequence = patches)."""

    def forward(self, x):
        return x.reshape(-1, 7, 4, 7, 4).permute(0, 1, 3, 2, 4).reshape(-1, 49, 16)


class EncoderBlock(torch.nn.Module):
    """Pre-norm: h = x + MHA(LN1(x)); y = h + W2 GELU(W1 LN2(h)) (nnbench's encoder layer)."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, ff)
        self.ff2 = torch.nn.Linear(ff, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))


class Transformer(torch.nn.Module):
    def __init__(self, seed, d=64, heads=4, ff=128, blocks=2, n=49):
        super().__init__()
        torch.manual_seed(seed)
        self.patches = Patches()
        self.embed = torch.nn.Linear(16, d)
        pos = torch.arange(n, dtype=torch.float64)[:, None]
        i = torch.arange(d)[None, :]
        ang = pos / torch.pow(10000.0, (i - i % 2).double() / d)
        self.register_buffer("pe", torch.where(i % 2 == 1, torch.cos(ang), torch.sin(ang)).float())
        self.blocks = torch.nn.Sequential(*[EncoderBlock(d, heads, ff) for _ in range(blocks)])
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, 10)

    def forward(self, x):
        h = self.blocks(self.embed(self.patches(x)) + self.pe)
        return self.head(self.ln(h).mean(dim=1))


def train_epoch(model, opt, x, y, seed, batch=BATCH):
    """One epoch; returns the wall time of the training loop alone."""
    n = x.shape[0]
    g = torch.Generator().manual_seed(seed)
    xb_buf = torch.empty(batch, 784)
    yb_buf = torch.empty(batch, dtype=torch.int64)
    t0 = time.perf_counter()
    perm = torch.randperm(n, generator=g)
    for i in range(0, n, batch):
        idx = perm[i:i + batch]
        rows = idx.shape[0]
        xb = torch.index_select(x, 0, idx, out=xb_buf[:rows])
        yb = torch.index_select(y, 0, idx, out=yb_buf[:rows])
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def accuracy(model, x, y):
    with torch.no_grad():
        correct = 0
        for i in range(0, x.shape[0], BATCH):
            correct += int((model(x[i:i + BATCH]).argmax(1) == y[i:i + BATCH]).sum())
    return correct / max(1, x.shape[0])


def run_train(args, xtr, ytr, xte, yte):
    model = make_model(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    dt = train_epoch(model, opt, xtr, ytr, args.seed)
    acc = accuracy(model, xte, yte)
    print(f"RESULT\ttorch\t{torch.get_num_threads()}\t{xtr.shape[0] / dt:.1f}\t{acc:.4f}", flush=True)


def run_train_cnn(args, xtr, ytr, xte, yte):
    model = make_cnn(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    dt = train_epoch(model, opt, xtr, ytr, args.seed, batch=64)
    acc = accuracy(model, xte, yte)
    print(f"RESULT\ttorch_cnn\t{torch.get_num_threads()}\t{xtr.shape[0] / dt:.1f}\t{acc:.4f}", flush=True)


def run_train_transformer(args, xtr, ytr, xte, yte):
    model = Transformer(args.seed)
    opt = torch.optim.Adam(model.parameters(), lr=0.002)
    dt = train_epoch(model, opt, xtr, ytr, args.seed, batch=64)
    model.eval()
    acc = accuracy(model, xte, yte)
    print(f"RESULT\ttorch_transformer\t{torch.get_num_threads()}\t{xtr.shape[0] / dt:.1f}\t{acc:.4f}", flush=True)


def run_profiler_cost(args, xtr, ytr):
    from torch.profiler import ProfilerActivity, profile
    ratios, off, on, whole = [], [], [], []
    for k in range(args.reps):
        model = make_model(args.seed + k)
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        t_off = train_epoch(model, opt, xtr, ytr, args.seed + k)
        model = make_model(args.seed + k)
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            t_on = train_epoch(model, opt, xtr, ytr, args.seed + k)
        prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
        t_whole = time.perf_counter() - t0
        ratios.append(t_on / t_off)
        off.append(t_off)
        on.append(t_on)
        whole.append(t_whole)
        print(f"peer_torch: rep {k + 1}: loop {t_off:.3f}s off, {t_on:.3f}s on, "
              f"{t_whole:.3f}s with stop+table", file=sys.stderr)
    print(f"RESULT\ttorch_profiler\t{statistics.median(ratios):.3f}\t{min(ratios):.3f}\t"
          f"{max(ratios):.3f}\t{statistics.median(off):.3f}\t{statistics.median(on):.3f}\t"
          f"{statistics.median(whole):.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["train", "train-cnn", "train-transformer", "profiler-cost"])
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n-train", type=int, default=0, help="0 = all 60000")
    ap.add_argument("--n-test", type=int, default=0, help="0 = all 10000")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    xtr, ytr = load("train", args.n_train)
    if args.mode in ("train", "train-cnn", "train-transformer"):
        xte, yte = load("t10k", args.n_test)
        run = {"train": run_train, "train-cnn": run_train_cnn, "train-transformer": run_train_transformer}
        run[args.mode](args, xtr, ytr, xte, yte)
    else:
        run_profiler_cost(args, xtr, ytr)


if __name__ == "__main__":
    main()
