#!/usr/bin/env python3
"""Seed inputs for the codec's libFuzzer targets (tests/codec/fuzz_*.c):
raw Deflate streams of several kinds of data, levels and block sizes, each
behind the three bytes fuzz_inflate_split.c reads first (the decoded size
in 512-byte steps, the segments' size).

    python3 tests/codec/fuzz_seeds.py inflate DIR
"""
from __future__ import annotations

import random
import struct
import sys
import zlib
from pathlib import Path


def kinds(n: int, rng: random.Random) -> dict[str, bytes]:
    """n bytes of each kind: a float field shuffled as HDF5 lays it out,
    image-like bytes, text, random bytes, a constant run."""
    count = n // 4
    values = [round(1000.0 + 50.0 * ((i % 97) / 97.0) + rng.random(), 3) for i in range(count)]
    raw = struct.pack(f"<{count}f", *values)
    shuffled = bytes(raw[i * 4 + t] for t in range(4) for i in range(count))
    image = bytes((((i % 64) // 8) * 30 + rng.randrange(3)) & 255 for i in range(n))
    words = [b"chunk", b"filter", b"deflate", b"segment", b"block", b"hdf5", b"gpu"]
    text = b" ".join(rng.choice(words) for _ in range(n // 4))[:n]
    return {
        "field": shuffled.ljust(n, b"\0"),
        "image": image,
        "text": text.ljust(n, b"."),
        "random": rng.getrandbits(8 * n).to_bytes(n, "little"),
        "constant": b"\x2a" * n,
    }


def raw_deflate(data: bytes, level: int, mem_level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -15, mem_level)
    return c.compress(data) + c.flush()


def inflate_seeds(out: Path) -> int:
    rng = random.Random(20261128)
    made = 0
    for n in (512, 4096, 16384, 65536):
        for name, data in kinds(n, rng).items():
            for level in (0, 1, 6, 9):
                for mem_level in (1, 8):  # memLevel 1: blocks of 128 symbols, many in a short stream
                    stream = raw_deflate(data, level, mem_level)
                    steps = n // 512 - 1
                    for per in (0, 1):
                        head = bytes((steps & 255, steps >> 8, per))
                        (out / f"{name}-{n}-l{level}-m{mem_level}-s{per}").write_bytes(head + stream)
                        made += 1
    return made


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] != "inflate":
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    print(f"{inflate_seeds(out)} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
