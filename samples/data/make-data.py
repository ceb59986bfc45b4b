#!/usr/bin/env python3
"""make-data.py — regenerates the sample CSV files in this directory, deterministically
(fixed seeds; only random.random(), whose Mersenne Twister stream is stable across Python 3
versions; Box-Muller by hand rather than random.gauss). Run: python3 samples/data/make-data.py

  rings.csv      900 points on 3 concentric noisy rings, classes 0/1/2 (header x1,x2,ring)
  rings-test.csv 300 more points from the same rings with another seed (a separate test file)
  friedman1.csv  1000 rows of Friedman's #1 regression benchmark: 10 features uniform in
                 [0,1), y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + N(0,1);
                 x6..x10 are pure noise features (header x1..x10,y)
"""
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))


def normal(r):
    u1 = max(r.random(), 1e-300)
    u2 = r.random()
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def rings(path, n, seed):
    r = random.Random(seed)
    with open(path, "w") as f:
        f.write("x1,x2,ring\n")
        for i in range(n):
            k = i % 3
            radius = 1.0 + k + 0.15 * normal(r)
            angle = 2.0 * math.pi * r.random()
            f.write("%.5f,%.5f,%d\n" % (radius * math.cos(angle), radius * math.sin(angle), k))


def friedman1(path, n, seed):
    r = random.Random(seed)
    with open(path, "w") as f:
        f.write(",".join("x%d" % (j + 1) for j in range(10)) + ",y\n")
        for _ in range(n):
            x = [r.random() for _ in range(10)]
            y = (10.0 * math.sin(math.pi * x[0] * x[1]) + 20.0 * (x[2] - 0.5) ** 2
                 + 10.0 * x[3] + 5.0 * x[4] + normal(r))
            f.write(",".join("%.5f" % v for v in x) + ",%.5f\n" % y)


if __name__ == "__main__":
    rings(os.path.join(HERE, "rings.csv"), 900, 1)
    rings(os.path.join(HERE, "rings-test.csv"), 300, 2)
    friedman1(os.path.join(HERE, "friedman1.csv"), 1000, 3)
