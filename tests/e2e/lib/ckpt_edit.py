#!/usr/bin/env python3
"""ckpt_edit.py DB RUN MODE [VALUE] — rewrites the newest checkpoint of RUN in DB the way a
crafted or damaged record would look, with a valid checksum (engine/checkpoint.c's layout:
the version at 8; the checksum of bytes [32, total) at offset 24, FNV-1a 64 in version 1,
XXH64 from version 2; n_params at 48; the parameters, f32, from 240).
MODE: nan (the first parameter becomes NaN), set VALUE (every parameter becomes VALUE)."""
import math, sqlite3, struct, sys

PARAMS_AT = 240


def fnv1a(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


M64 = 0xFFFFFFFFFFFFFFFF
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xround(acc, v):
    return (rotl((acc + v * P2) & M64, 31) * P1) & M64


def xxh64(b):
    """XXH64, seed 0, of bytes b (little-endian words, as the records are on x86)."""
    n, i, word = len(b), 0, lambda k, w: int.from_bytes(b[k:k + w], "little")
    if n >= 32:
        v = [(P1 + P2) & M64, P2, 0, (-P1) & M64]
        while n - i >= 32:
            v = [xround(v[j], word(i + 8 * j, 8)) for j in range(4)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for x in v:
            h = ((h ^ xround(0, x)) * P1 + P4) & M64
    else:
        h = P5
    h = (h + n) & M64
    while n - i >= 8:
        h = (rotl(h ^ xround(0, word(i, 8)), 27) * P1 + P4) & M64
        i += 8
    if n - i >= 4:
        h = (rotl(h ^ (word(i, 4) * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (rotl(h ^ (b[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M64
    h = ((h ^ (h >> 29)) * P3) & M64
    return h ^ (h >> 32)


def edit(blob, mode, value):
    rec = bytearray(blob)
    n = struct.unpack_from("<Q", rec, 48)[0]
    if mode == "nan":
        struct.pack_into("<f", rec, PARAMS_AT, math.nan)
    elif mode == "set":
        for i in range(n):
            struct.pack_into("<f", rec, PARAMS_AT + 4 * i, value)
    else:
        sys.exit("ckpt_edit.py: unknown mode " + mode)
    version = struct.unpack_from("<I", rec, 8)[0]
    struct.pack_into("<Q", rec, 24, (fnv1a if version == 1 else xxh64)(bytes(rec[32:])))
    return bytes(rec)


def main():
    db, run, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    value = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    con = sqlite3.connect(db)
    row = con.execute("SELECT step, data FROM checkpoints WHERE run=? ORDER BY step DESC LIMIT 1", (run,)).fetchone()
    if not row:
        sys.exit("ckpt_edit.py: run %d has no checkpoint" % run)
    con.execute("UPDATE checkpoints SET data=? WHERE run=? AND step=?", (edit(row[1], mode, value), run, row[0]))
    con.commit()


if __name__ == "__main__":
    main()
