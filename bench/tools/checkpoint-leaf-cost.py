"""Per-leaf CPU cost of h5gds.save (no GPU needed): host numpy leaves of the
benchmark state's shape count (192 leaves: 96 + 32 + 64), but small (4 KiB
each) so that copying does not hide the Python and HDF5 work per leaf.

  python bench/tools/checkpoint-leaf-cost.py [--dir DIR] [--repeat 20] [--leaves 192] [--profile]

Prints the median stall of save(async_=True) (time until it returns) divided
by the number of leaves, and with --profile the top functions by cumulative
time (cProfile) of one save.
"""
import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time

import numpy as np

import h5gds


def state(n: int) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for i in range(n):
        group = "layers" if i < n // 2 else "embed" if i < n // 2 + n // 6 else "norm"
        out[f"{group}.{i}.weight"] = rng.standard_normal(2048).astype(np.float16)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--leaves", type=int, default=192)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    s = state(args.leaves)
    path = os.path.join(args.dir, f"leaf-cost-{os.getpid()}.h5")
    h5gds.save(s, path).wait()  # warm: imports, the kept snapshot arena, the worker pool
    stalls = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        h = h5gds.save(s, path)
        stalls.append(time.perf_counter() - t0)
        h.wait()
    med = statistics.median(stalls)
    print(f"leaves={args.leaves} stall median {med * 1e3:.2f} ms min {min(stalls) * 1e3:.2f} ms "
          f"per leaf {med / args.leaves * 1e6:.1f} us")
    back = h5gds.load(path)
    assert all(np.array_equal(back[k], v) for k, v in s.items()), "checkpoint differs"
    if args.profile:
        pr = cProfile.Profile()
        pr.enable()
        h = h5gds.save(s, path)
        pr.disable()
        h.wait()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
    os.unlink(path)


if __name__ == "__main__":
    main()
