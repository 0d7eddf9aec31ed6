"""What the benchmarks of the Python layer share: the page cache (drop,
warm, fsync), the clock, the ceilings' pread and pwrite from native code,
the CSV rows (bench.csv, bench-median.csv) with their one-line print and
the figure, and the command line's argument types and one-line errors."""
from __future__ import annotations

import argparse
import csv
import ctypes
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from h5gds._lib import errbuf, native
from h5gds._sizes import SizeError, parse_size

from ._device import Device

# ---- the page cache ---------------------------------------------------------------

def fadvise_dontneed(path: Path | str) -> None:
    """Drops the file's own clean pages (fsync, then fadvise DONTNEED)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_cache(path: Path) -> str:
    """Drops the file's pages: the whole page cache when root, else the
    file's own clean pages (fadvise DONTNEED after fsync)."""
    fadvise_dontneed(path)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        return "fadvise"


def warm(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- the clock and the ceilings ----------------------------------------------------

def timed(fn: Callable[[], Any], dev: Device | None = None) -> float:
    if dev:
        dev.sync()
    t0 = time.perf_counter()
    fn()
    if dev:
        dev.sync()
    return time.perf_counter() - t0


def ceiling_seconds(path: Path, direct: bool, threads: int, sample: int, offsets: np.ndarray) -> float:
    """Seconds `threads` threads take to pread `sample` bytes at each of
    `offsets` (uint64) of `path` (O_DIRECT when `direct`): the ceilings."""
    secs, err = ctypes.c_double(), errbuf()
    rc = native.h5gds_py_ceiling_pread(str(path).encode(), int(direct), threads, sample, len(offsets),
                                       offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                       ctypes.byref(secs), err, len(err))
    if rc != 0:
        raise OSError(-rc, err.value.decode())
    return secs.value


def ceiling_write_seconds(path: Path, direct: bool, threads: int, block: int, offsets: np.ndarray) -> float:
    """Seconds `threads` threads take to write `block` bytes (non-zero
    pseudo-random) at each of `offsets` (uint64) into `path`, created or
    truncated (O_DIRECT when `direct`: offsets and block multiples of 4096):
    the fallocate of the whole extent, the writes and the fsync, the write
    ceiling. The file is left in place, at the size the blocks cover."""
    offsets = np.ascontiguousarray(offsets, dtype=np.uint64)
    secs, err = ctypes.c_double(), errbuf()
    rc = native.h5gds_py_ceiling_pwrite(str(path).encode(), int(direct), threads, block, len(offsets),
                                        offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                        ctypes.byref(secs), err, len(err))
    if rc != 0:
        raise OSError(-rc, err.value.decode())
    return secs.value


# ---- rows: bench.csv, bench-median.csv, bench.png --------------------------------

Row = dict[str, Any]


def row(bench: str, method: str, sample: int, cache: str, bps: float, per_s: float, rep: int = 0,
        note: str = "") -> Row:
    return {"bench": bench, "method": method, "sample_bytes": sample, "cache": cache, "GBps": round(bps / 1e9, 4),
            "samples_per_s": round(per_s, 1), "repeat": rep, "note": note}


def print_row(rs: list[Row]) -> None:
    for r in rs:
        print(f"{r['bench']:7s} {r['method']:22s} {r['sample_bytes']:>11d} {r['cache']:14s} {r['GBps']:8.3f} GB/s "
              f"{r['samples_per_s']:>12.0f}/s {r['note']}", flush=True)


def median_rows(rows: list[Row]) -> list[Row]:
    """One row per (bench, method, size, cache): the median over repeats."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["bench"], r["method"], r["sample_bytes"], r["cache"]), []).append(r)
    out = []
    for (bench, method, sample, cache), rs in groups.items():
        gb = [r["GBps"] for r in rs]
        med = float(np.median(gb)) if gb else float("nan")
        m: Row = {"bench": bench, "method": method, "sample_bytes": sample, "cache": cache, "GBps": round(med, 4),
                  "samples_per_s": round(float(np.median([r["samples_per_s"] for r in rs])), 1),
                  "repeats": len(rs), "note": rs[len(rs) // 2]["note"]}
        over = [r["overhead_pct"] for r in rs if "overhead_pct" in r]
        if over:
            m["overhead_pct"] = round(float(np.median(over)), 2)
        out.append(m)
    return out


class CsvRows:
    """Rows of one benchmark's CSV: each one printed as a comma line and the
    file written again with it (a run cut short keeps what it measured)."""

    def __init__(self, path: Path, columns: list[str]):
        self.path, self.columns = path, columns
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(",".join(str(row[c]) for c in self.columns), flush=True)
        with open(self.path, "w", newline="") as fh:
            w = csv.DictWriter(fh, self.columns)
            w.writeheader()
            w.writerows(self.rows)


def write_csv(rows: list[Row], out: Path) -> list[Row]:
    """OUT/bench.csv (every row) and OUT/bench-median.csv (medians over
    repeats, also printed); returns the medians."""
    csv_path = out / "bench.csv"
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["bench", "method", "sample_bytes", "cache", "GBps", "samples_per_s",
                                          "repeat", "note", "overhead_pct"])
        w.writeheader()
        w.writerows(rows)
    print(f"csv: {csv_path}", flush=True)
    medians = median_rows(rows)
    with open(out / "bench-median.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["bench", "method", "sample_bytes", "cache", "GBps", "samples_per_s",
                                          "repeats", "note", "overhead_pct"])
        w.writeheader()
        w.writerows(medians)
    print("medians:", flush=True)
    print_row([{**m, "repeat": 0} for m in medians])
    return medians


def pyplot() -> Any:
    """matplotlib.pyplot drawing to files (Agg), or None when matplotlib is
    not importable (a line says the plot is skipped)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib not importable", flush=True)
        return None
    return plt


def plot(rows: list[Row], png: Path) -> None:
    groups = sorted({(r["bench"], r["cache"]) for r in rows if r["cache"] != "-"})
    if not groups:  # only skipped methods (or none): no figure, not an error
        print("plot skipped: no measurements to plot", flush=True)
        return
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 3.2 * len(groups)), squeeze=False)
    for ax, (bench, cache) in zip(axes[:, 0], groups):
        sel = [r for r in rows if r["bench"] == bench and r["cache"] == cache]
        methods = sorted({r["method"] for r in sel})
        sizes = sorted({r["sample_bytes"] for r in sel})
        w = 0.8 / max(1, len(methods))
        for k, m in enumerate(methods):
            ys = [np.median([r["GBps"] for r in sel if r["method"] == m and r["sample_bytes"] == s] or [0])
                  for s in sizes]
            ax.bar(np.arange(len(sizes)) + k * w, ys, w, label=m)
        ax.set_xticks(np.arange(len(sizes)) + 0.4 - w / 2, [f"{s >> 10} KiB" if s < 1 << 20 else f"{s >> 20} MiB"
                                                             for s in sizes])
        ax.set_ylabel("GB/s")
        ax.set_title(f"{bench}: {cache}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot: {png}", flush=True)


# ---- the command line ---------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (what is wrong), exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (--help for usage)\n")


def size_arg(text: str) -> int:
    """argparse type: one positive size (h5gds._sizes syntax)."""
    try:
        n = parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n == 0:
        raise argparse.ArgumentTypeError(f"size {text!r} must be more than 0 bytes")
    return n


def size_list_arg(text: str) -> list[int]:
    """argparse type: a comma list of positive sizes."""
    return [size_arg(item) for item in text.split(",")]


def int_arg(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is less than {minimum}")
        return n
    return parse


def ms_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of milliseconds")
    return v
