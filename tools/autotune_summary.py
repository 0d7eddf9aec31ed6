#!/usr/bin/env python3
"""Autotuned GDS against the best point of the threads x block sweep.

Reads an h5gds-bench CSV made with --threads/--blocks lists that include
`auto` (threads or block column 0 in the driver_config means auto) and prints,
per size and phase, the median rate of every point, the best point, and the
ratio of the fully automatic point (threads=auto, block=auto) to it.
    python3 tools/autotune_summary.py autotune.csv
"""
import csv
import statistics
import sys
from collections import defaultdict


def point_name(cfg: str) -> str:
    keys = dict(kv.split("=", 1) for kv in cfg.split(",") if "=" in kv)
    threads = keys.get("threads", "auto")
    block = keys.get("io_block_size", "auto")
    if block != "auto":
        block = f"{int(block) >> 20}MiB"
    return f"{threads} x {block}"


def main(path: str) -> int:
    rates = defaultdict(list)
    for row in csv.DictReader(open(path, newline="")):
        if row["method"] != "GDS":
            continue
        rates[(int(row["size_bytes"]), row["phase"], point_name(row["driver_config"]))].append(float(row["rate_GBps"]))
    if not rates:
        print(f"{path}: no GDS rows")
        return 1
    print("| size | phase | best point (median GB/s) | auto x auto | auto / best | points |")
    print("|---|---|---|---|---|---|")
    worst = None
    for size, phase in sorted({(k[0], k[1]) for k in rates}):
        med = {k[2]: statistics.median(v) for k, v in rates.items() if k[0] == size and k[1] == phase}
        best = max(med, key=med.get)
        auto = med.get("auto x auto")
        ratio = auto / med[best] if auto else float("nan")
        worst = ratio if worst is None or ratio < worst else worst
        n = len(next(v for k, v in rates.items() if k[0] == size and k[1] == phase))
        print(f"| {size >> 20} MiB | {phase} | {best}: {med[best]:.2f} | {auto:.2f} | {ratio:.2f} | "
              f"{len(med)} points, {n} repeats |")
    print(f"\nlowest auto / best: {worst:.2f} (goal >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "autotune.csv"))
