#!/usr/bin/env python3
"""Autotuned GDS against the best point of the threads x block sweep.

Reads an h5gds-bench CSV made with --threads/--blocks lists that include
`auto` (threads or block column 0 in the driver_config means auto) and prints,
per size and phase, the median rate of every point, the best point, and the
ratio of the fully automatic point (threads=auto, block=auto) to it.
With --tuned THREADSxBLOCK (what `h5gds-bench --tune` chose, e.g. 16x32MiB, or
the tune.txt it printed) it also pools the rows whose effective setting is the
same (auto x 32MiB is 16 x 32MiB when 16 threads were tuned) and prints the
spread of each setting: on a shared disk the spread of one setting shows
whether two points can be told apart at all.
    python3 tools/autotune_summary.py autotune.csv [--tuned 16x32MiB | --tuned tune.txt]
"""
import csv
import os
import re
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


def parse_tuned(arg: str) -> tuple[int, int]:
    text = open(arg).read() if os.path.exists(arg) else arg
    m = re.search(r"threads=(\d+) io_block_size=(\d+)MiB", text) or re.search(r"(\d+)x(\d+)MiB", text)
    if not m:
        raise SystemExit(f"--tuned: no 'THREADSxBLOCKMiB' or 'threads=T io_block_size=BMiB' in {arg!r}")
    return int(m.group(1)), int(m.group(2)) << 20


def pooled(path: str, tuned: tuple[int, int]) -> None:
    rates = defaultdict(list)
    for row in csv.DictReader(open(path, newline="")):
        if row["method"] != "GDS":
            continue
        threads = int(row["threads"]) or tuned[0]
        block = int(row["block_bytes"]) or tuned[1]
        rates[(int(row["size_bytes"]), row["phase"], (threads, block))].append(float(row["rate_GBps"]))
    print(f"\nPooled by effective setting (auto = {tuned[0]} x {tuned[1] >> 20}MiB):\n")
    print("| size | phase | setting | rows | median | min - max |")
    print("|---|---|---|---|---|---|")
    for size, phase in sorted({(k[0], k[1]) for k in rates}):
        sets = {k[2]: v for k, v in rates.items() if k[0] == size and k[1] == phase}
        best = max(sets, key=lambda c: statistics.median(sets[c]))
        for c in sorted(sets, key=lambda c: -statistics.median(sets[c])):
            v = sets[c]
            mark = (" (auto)" if c == tuned else "") + (" (best)" if c == best else "")
            print(f"| {size >> 20} MiB | {phase} | {c[0]} x {c[1] >> 20}MiB{mark} | {len(v)} | "
                  f"{statistics.median(v):.2f} | {min(v):.2f} - {max(v):.2f} |")
        if tuned in sets:
            print(f"| | | auto / best | | {statistics.median(sets[tuned]) / statistics.median(sets[best]):.2f} | |")


def main(path: str, tuned: tuple[int, int] | None = None) -> int:
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
    if tuned:
        pooled(path, tuned)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    tuned_setting = None
    if "--tuned" in args:
        i = args.index("--tuned")
        if i + 1 >= len(args):
            raise SystemExit("--tuned needs a value")
        tuned_setting = parse_tuned(args[i + 1])
        del args[i:i + 2]
    sys.exit(main(args[0] if args else "autotune.csv", tuned_setting))
