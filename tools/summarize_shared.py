#!/usr/bin/env python3
"""Summary of scripts/gpu.sh bench-mpio's CSVs against issue 16's goals:
medians of the aggregate rows (rank = all) of h5gds-bench, GB/s = 1e9 B/s.
    summarize_shared.py OUT_DIR     (prints markdown)
"""
import csv
import pathlib
import statistics
import sys

from cli_common import ArgumentParser


def load(path):
    if not path.exists():
        return None
    return list(csv.DictReader(open(path)))


def med(rows, method, phase, rank="all"):
    v = [float(r["rate_GBps"]) for r in rows
         if r["method"] == method and r["phase"] == phase and r.get("rank", "all") == rank]
    return statistics.median(v) if v else None


def fmt(x):
    return "-" if x is None else f"{x:.2f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def goal(label, value, target, higher=True):
    if value is None:
        return f"| {label} | - | {target} | not measured |"
    ok = value >= target if higher else value <= target
    return f"| {label} | {value:.2f} | {target} | {'met' if ok else 'NOT met'} |"


def main(argv=None):
    ap = ArgumentParser(prog="summarize_shared", description=__doc__)
    ap.add_argument("out_dir", type=pathlib.Path, help="the directory of scripts/gpu.sh bench-mpio's CSVs")
    out = ap.parse_args(argv).out_dir
    if not out.is_dir():
        ap.error(f"argument out_dir: {str(out)!r} is not a directory")
    lines = ["# gds_mpio shared-file benchmark (scripts/gpu.sh bench-mpio)", ""]
    np4 = load(out / "np4.csv")
    if np4:
        ranks = np4[0].get("ranks", "?")
        lines += [f"## {ranks} ranks, {int(np4[0]['size_bytes']) >> 20} MiB per rank, aggregate GB/s (median)", "",
                  "| method | write | cold_read | warm_read |", "|---|---|---|---|"]
        for m in ("CEIL-ODIRECT", "CEIL-PAGECACHE", "CEIL-H2D", "GDS-SHARED", "MPIO-HOST", "GDS"):
            lines.append(f"| {m} | " + " | ".join(fmt(med(np4, m, ph)) for ph in ("write", "cold_read", "warm_read")) + " |")
        warm_ceil = [c for c in (med(np4, "CEIL-PAGECACHE", "warm_read"), med(np4, "CEIL-H2D", "warm_read")) if c]
        lines += ["", "| goal | value | target | |", "|---|---|---|---|",
                  goal("GDS-SHARED durable write / CEIL-ODIRECT", ratio(med(np4, "GDS-SHARED", "write"),
                                                                       med(np4, "CEIL-ODIRECT", "write")), 0.85),
                  goal("GDS-SHARED cold read / CEIL-ODIRECT", ratio(med(np4, "GDS-SHARED", "cold_read"),
                                                                   med(np4, "CEIL-ODIRECT", "cold_read")), 0.85),
                  goal("GDS-SHARED warm read / min(page cache, H2D)",
                       ratio(med(np4, "GDS-SHARED", "warm_read"), min(warm_ceil) if warm_ceil else None), 0.80),
                  goal("GDS-SHARED / MPIO-HOST, warm read", ratio(med(np4, "GDS-SHARED", "warm_read"),
                                                                 med(np4, "MPIO-HOST", "warm_read")), 2.0),
                  goal("GDS-SHARED / MPIO-HOST, write", ratio(med(np4, "GDS-SHARED", "write"),
                                                             med(np4, "MPIO-HOST", "write")), 1.3)]
    b6, b9 = load(out / "boundary-4096.csv"), load(out / "boundary-4099.csv")
    if b6 and b9:
        lines += ["", f"## Rank boundaries every 4096 vs 4099 elements (2-D blocks), "
                      f"{int(b6[0]['size_bytes']) >> 20} MiB per rank, aggregate GB/s", "",
                  "| method | phase | 4096 | 4099 | 4099 / 4096 |", "|---|---|---|---|---|"]
        for m in ("GDS-SHARED", "MPIO-HOST"):
            for ph in ("write", "cold_read", "warm_read"):
                a, u = med(b6, m, ph), med(b9, m, ph)
                lines.append(f"| {m} | {ph} | {fmt(a)} | {fmt(u)} | {fmt(ratio(u, a))} |")
        lines += ["", "| goal | value | target | |", "|---|---|---|---|"]
        for ph in ("write", "cold_read", "warm_read"):
            lines.append(goal(f"GDS-SHARED {ph}: unaligned / aligned", ratio(med(b9, "GDS-SHARED", ph),
                                                                             med(b6, "GDS-SHARED", ph)), 0.90))
    np1, serial = load(out / "np1.csv"), load(out / "serial.csv")
    if np1 and serial:
        lines += ["", "## 1 rank of gds_mpio vs the serial gds driver (no mpirun), GB/s", "",
                  "| phase | GDS-SHARED (1 rank) | GDS serial | GDS file per rank (1 rank) | shared / serial |",
                  "|---|---|---|---|---|"]
        for ph in ("write", "cold_read", "warm_read"):
            s, g, f = med(np1, "GDS-SHARED", ph), med(serial, "GDS", ph), med(np1, "GDS", ph)
            lines.append(f"| {ph} | {fmt(s)} | {fmt(g)} | {fmt(f)} | {fmt(ratio(s, g))} |")
        lines += ["", "| goal | value | target | |", "|---|---|---|---|"]
        for ph in ("write", "cold_read", "warm_read"):
            lines.append(goal(f"1 rank {ph}: GDS-SHARED / serial GDS", ratio(med(np1, "GDS-SHARED", ph),
                                                                            med(serial, "GDS", ph)), 0.95))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
