"""How many background writes and pool workers a checkpoint's drain keeps
busy at once (no GPU needed: host numpy leaves through the same write-behind
machinery). Prints one CSV row per save.

  python bench/tools/checkpoint-drain-concurrency.py [--dir DIR] [--threads 8] [--leaves 64] [--mib 4] [--repeat 2]

Columns: async,threads,leaves,leaf_bytes,stall_s,durable_s,peak_background_writes,peak_busy_workers,reserved_bytes
(times on a shared 2-core machine are noise; the counts are the point).
"""
import argparse
import os
import tempfile
import time

import numpy as np

import h5gds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=64)
    ap.add_argument("--mib", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.mib << 18  # float32 elements
    state = {f"w{i}": rng.standard_normal(n).astype(np.float32) for i in range(args.leaves)}
    path = os.path.join(args.dir, f"drain-{os.getpid()}.h5")
    print("async,threads,leaves,leaf_bytes,stall_s,durable_s,peak_background_writes,peak_busy_workers,reserved_bytes")
    for async_ in (True, False):
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            h = h5gds.save(state, path, async_=async_, threads=args.threads)
            stall = time.perf_counter() - t0
            h.wait()
            print(f"{int(async_)},{args.threads},{args.leaves},{n * 4},{stall:.4f},{h.durable_s:.4f},"
                  f"{h.peak_background_writes},{h.peak_busy_workers},{h.reserved_bytes}")
    os.unlink(path)


if __name__ == "__main__":
    main()
