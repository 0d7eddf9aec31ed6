#!/usr/bin/env python3
"""Figures and a summary table from an h5gds-bench CSV (peers' rows may be
appended). Like the GDS VFD paper: rate vs size per method, one figure per
phase (Fig. 3-4), and a threads x block heat map when the CSV holds a sweep
(Fig. 5-6).

    python3 tools/plot_bench.py RESULTS.csv [--summary SUMMARY.md] [--no-figures]
"""
import argparse
import collections
import csv
import os
import statistics
import sys

from cli_common import ArgumentParser, fail

PROG = "plot_bench"

PHASES = ("write", "cold_read", "warm_read")
CEILING = {"write": ["CEIL-ODIRECT"], "cold_read": ["CEIL-ODIRECT"], "warm_read": ["CEIL-PAGECACHE", "CEIL-H2D"]}


def load(path):
    """The CSV's rows (the aggregate ones under MPI); a file that is not an
    h5gds-bench CSV is a one-line error. No rows is not an error."""
    need = {"method", "phase", "memory", "size_bytes", "threads", "block_bytes", "repeat", "seconds", "rate_GBps"}
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            columns = set(reader.fieldnames or ())
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        fail(PROG, f"cannot read {path}: {exc}")
    if not need <= columns:
        fail(PROG, f"{path}: not an h5gds-bench CSV (missing columns {', '.join(sorted(need - columns))})")
    # Under MPI the bench writes each rank's rows and the aggregate ("all"):
    # figures and summaries are of the aggregate.
    if "rank" in columns:
        rows = [r for r in rows if r["rank"] == "all"]
    for line, r in enumerate(rows, start=2):
        try:
            int(r["size_bytes"]), int(r["threads"]), int(r["block_bytes"]), float(r["rate_GBps"])
        except (TypeError, ValueError):
            fail(PROG, f"{path}: a row (line {line}) has a value that is not a number")
    return rows


def medians(rows):
    """(method, phase, size, threads, block) -> median GB/s"""
    acc = collections.defaultdict(list)
    for r in rows:
        acc[(r["method"], r["phase"], int(r["size_bytes"]), int(r["threads"]), int(r["block_bytes"]))].append(
            float(r["rate_GBps"]))
    return {k: statistics.median(v) for k, v in acc.items()}


def best(med, method, phase, size):
    """Best median over thread/block settings (kvikio 'at its best thread count')."""
    vals = [(v, k[3]) for k, v in med.items() if k[0] == method and k[1] == phase and k[2] == size]
    return max(vals) if vals else (None, None)


def ceiling(med, phase, size):
    vals = [best(med, m, phase, size)[0] for m in CEILING[phase]]
    vals = [v for v in vals if v]
    return min(vals) if vals else None


def summary(med, sizes, out):
    methods = ["GDS", "SEC2", "SEC2+PINNED", "kvikio", "h5py+cupy"]
    lines = ["| size | phase | " + " | ".join(methods) + " | ceiling | GDS % of ceiling |",
             "|---|---|" + "---|" * (len(methods) + 2)]
    for size in sizes:
        for phase in PHASES:
            cells = []
            for m in methods:
                v, t = best(med, m, phase, size)
                cells.append("–" if v is None else (f"{v:.2f} ({t} thr)" if m == "kvikio" else f"{v:.2f}"))
            c = ceiling(med, phase, size)
            g = best(med, "GDS", phase, size)[0]
            pct = f"{100 * g / c:.0f}%" if g and c else "–"
            lines.append(f"| {size >> 20} MiB | {phase} | " + " | ".join(cells) +
                         f" | {c:.2f} |" if c else f"| {size >> 20} MiB | {phase} | " + " | ".join(cells) + " | – |")
            lines[-1] += f" {pct} |"
    text = "\n".join(lines) + "\n\nGB/s (1e9 bytes/s), median of the repeats; kvikio at its best thread count.\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)


def figures(rows, med, stem):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_bench: matplotlib not installed; no figures", file=sys.stderr)
        return []
    made = []
    # One colour per method in every panel; each panel shows its own ceilings only.
    everything = sorted({k[0] for k in med if not k[0].startswith("CEIL")})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {m: palette[i % len(palette)] for i, m in enumerate(everything)}
    colour.update({"CEIL-ODIRECT": "black", "CEIL-PAGECACHE": "dimgray", "CEIL-H2D": "silver"})
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, phase in zip(axes, PHASES):
        methods = [m for m in everything if any(k[0] == m and k[1] == phase for k in med)]
        methods += [c for c in CEILING[phase] if any(k[0] == c and k[1] == phase for k in med)]
        for m in methods:
            pts = collections.defaultdict(float)
            for k, v in med.items():
                if k[0] == m and k[1] == phase:
                    pts[k[2]] = max(pts[k[2]], v)
            xs = sorted(pts)
            style = "--" if m.startswith("CEIL") else "-"
            ax.plot([x / (1 << 20) for x in xs], [pts[x] for x in xs], style, marker="o", label=m, color=colour[m])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("dataset size (MiB)")
        ax.set_ylabel("GB/s")
        ax.set_title(phase.replace("_", " "))
        ax.grid(alpha=0.3)
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = stem + "-rate-vs-size.png"
    fig.savefig(path, dpi=110)
    made.append(path)
    # threads x block heat maps (sweep rows of GDS methods)
    sweep = [k for k in med if k[0].startswith("GDS")]
    threads = sorted({k[3] for k in sweep})
    blocks = sorted({k[4] for k in sweep})
    if len(threads) > 1 and len(blocks) > 1:
        size = max(k[2] for k in sweep)
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
        for ax, phase in zip(axes, PHASES):
            grid = [[med.get(("GDS", phase, size, t, b), float("nan")) for b in blocks] for t in threads]
            im = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto")
            ax.set_xticks(range(len(blocks)), [f"{b >> 20}M" for b in blocks])
            ax.set_yticks(range(len(threads)), threads)
            ax.set_xlabel("I/O block size")
            ax.set_ylabel("I/O threads")
            ax.set_title(f"GDS {phase.replace('_', ' ')}, {size >> 20} MiB (GB/s)")
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if v == v:
                        ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="w", fontsize=7)
            fig.colorbar(im, ax=ax)
        fig.tight_layout()
        path = stem + "-threads-blocks.png"
        fig.savefig(path, dpi=110)
        made.append(path)
    return made


def main(argv=None):
    ap = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--summary")
    ap.add_argument("--no-figures", action="store_true")
    args = ap.parse_args(argv)
    rows = load(args.csv)
    if not rows:  # a run that measured nothing: nothing to draw or summarise
        print(f"{PROG}: {args.csv} has no rows: no summary, no figures")
        return 0
    med = medians(rows)
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    try:
        if args.summary:
            summary(med, sizes, args.summary)
        if not args.no_figures:
            for p in figures(rows, med, os.path.splitext(args.csv)[0]):
                print(f"figure: {p}")
    except OSError as exc:
        fail(PROG, f"cannot write {exc.filename or 'a figure'}: {exc.strerror or exc}", status=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
