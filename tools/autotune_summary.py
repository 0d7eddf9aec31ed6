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
import argparse
import csv
import os
import re
import statistics
import sys
from collections import defaultdict

from cli_common import ArgumentParser, SizeError, fail, parse_size

PROG = "autotune_summary"


def point_name(cfg: str) -> str:
    keys = dict(kv.split("=", 1) for kv in cfg.split(",") if "=" in kv)
    threads = keys.get("threads", "auto")
    block = keys.get("io_block_size", "auto")
    if block != "auto":
        block = f"{int(block) >> 20}MiB"
    return f"{threads} x {block}"


def parse_tuned(arg: str) -> tuple[int, int]:
    """THREADSxBLOCK (16x32MiB; the block a size as in the gds configuration),
    or a file holding 'threads=T io_block_size=B' (what h5gds-bench --tune prints)."""
    try:
        text = open(arg).read() if os.path.isfile(arg) else arg
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {arg!r}: {exc.strerror}") from None
    m = re.search(r"threads=(\d+) io_block_size=(\w+)", text) or re.fullmatch(r"(\d+)x(\w+)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"no 'THREADSxBLOCK' (e.g. 16x32MiB) or 'threads=T io_block_size=B' in {arg!r}")
    try:
        block = parse_size(m.group(2), "block")
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if int(m.group(1)) < 1 or block < 1:
        raise argparse.ArgumentTypeError(f"threads and block must be more than 0 in {arg!r}")
    return int(m.group(1)), block


def read_rows(path: str) -> list[dict[str, str]]:
    """The CSV's GDS rows, checked; a file that is not an h5gds-bench CSV is a one-line error."""
    need = {"method", "phase", "size_bytes", "threads", "block_bytes", "rate_GBps", "driver_config"}
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            columns = set(reader.fieldnames or ())
            rows = [r for r in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        fail(PROG, f"cannot read {path}: {exc}")
    if not need <= columns:
        fail(PROG, f"{path}: not an h5gds-bench CSV (missing columns {', '.join(sorted(need - columns))})")
    rows = [r for r in rows if r["method"] == "GDS"]
    for line, r in enumerate(rows, start=2):
        try:
            int(r["size_bytes"]), int(r["threads"]), int(r["block_bytes"]), float(r["rate_GBps"])
            point_name(r["driver_config"])
        except (TypeError, ValueError):
            fail(PROG, f"{path}: a GDS row has a value that is not a number ({r})")
    return rows


def pooled(path: str, tuned: tuple[int, int]) -> None:
    rates = defaultdict(list)
    for row in read_rows(path):
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
    for row in read_rows(path):
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
        ratio = auto / med[best] if auto else None
        if ratio is not None:
            worst = ratio if worst is None or ratio < worst else worst
        n = len(next(v for k, v in rates.items() if k[0] == size and k[1] == phase))
        print(f"| {size >> 20} MiB | {phase} | {best}: {med[best]:.2f} | {'-' if auto is None else f'{auto:.2f}'} | "
              f"{'-' if ratio is None else f'{ratio:.2f}'} | {len(med)} points, {n} repeats |")
    print(f"\nlowest auto / best: {'- (no auto x auto rows)' if worst is None else f'{worst:.2f}'} (goal >= 0.95)")
    if tuned:
        pooled(path, tuned)
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", default="autotune.csv")
    ap.add_argument("--tuned", type=parse_tuned, help="THREADSxBLOCK (16x32MiB) or the tune.txt --tune printed")
    args = ap.parse_args(argv)
    return main(args.csv, args.tuned)


if __name__ == "__main__":
    sys.exit(cli())
