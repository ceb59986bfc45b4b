#!/usr/bin/env python3
"""ckpt_edit.py DB RUN MODE [VALUE] — rewrites the newest checkpoint of RUN in DB the way a
crafted or damaged record would look, with a valid checksum (engine/checkpoint.c's layout:
FNV-1a 64 of bytes [32, total) at offset 24; n_params at 48; the parameters, f32, from 240).
MODE: nan (the first parameter becomes NaN), set VALUE (every parameter becomes VALUE)."""
import math, sqlite3, struct, sys

PARAMS_AT = 240


def fnv1a(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


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
    struct.pack_into("<Q", rec, 24, fnv1a(rec[32:]))
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
