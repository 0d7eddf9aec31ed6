"""The rows of h5gds.bench.loader_epoch: the CSV columns, a row of one
measurement, its printed line (each printed row also rewrites the CSV so
far), the medians over repeats and the CSV files."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

Row = dict[str, Any]
_ROWS: list[list[Row]] = []
FIELDS = ["bench", "method", "order", "sample", "sample_bytes", "cache", "GBps", "samples_per_s", "seconds",
          "bytes", "epoch_fraction", "repeat", "note"]


def row(bench: str, method: str, order: str, label: str, sample_bytes: float, cache: str, nbytes: int,
        nsamples: int, secs: float, fraction: float, rep: int, note: str = "") -> Row:
    return {"bench": bench, "method": method, "order": order, "sample": label, "sample_bytes": round(sample_bytes),
            "cache": cache, "GBps": round(nbytes / secs / 1e9, 4) if secs > 0 else float("nan"),
            "samples_per_s": round(nsamples / secs, 1) if secs > 0 else float("nan"),
            "seconds": round(secs, 4), "bytes": nbytes, "epoch_fraction": round(fraction, 4), "repeat": rep,
            "note": note}


_CSV_OUT: list[Path] = []


def print_row(r: Row) -> None:
    """Prints a row (and rewrites the CSV so far: a run cut short keeps its rows)."""
    if _CSV_OUT and _ROWS:
        write_csv(_CSV_OUT[0], _ROWS[0])
    print(f"{r['bench']:14s} {r['method']:22s} {r['order']:8s} {r['sample']:>6s} {r['cache']:5s} "
          f"{r['GBps']:8.3f} GB/s {r['seconds']:8.3f} s  x{r['epoch_fraction']:.3f}  {r['note']}", flush=True)


# Rows that are not repeated measurements of a rate: each one a configuration
# of its own (world size, batch, seed in the note), kept as they are.
UNREPEATED_BENCHES = ("loader-randomness", "loader-accuracy")


def median_rows(rows: list[Row]) -> list[Row]:
    """One row per (bench, method, order, sample, cache): the medians over
    repeats; order statistics and accuracies kept row by row."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    out = []
    for r in rows:
        if r["bench"] in UNREPEATED_BENCHES:
            out.append(dict(r))
        else:
            groups.setdefault((r["bench"], r["method"], r["order"], r["sample"], r["cache"]), []).append(r)
    for rs in groups.values():
        m = dict(rs[len(rs) // 2])
        for k in ("GBps", "samples_per_s", "seconds"):
            vals = [float(r[k]) for r in rs]
            m[k] = round(float(np.median(vals)), 4)
        m["repeat"] = len(rs)
        out.append(m)
    return out


def write_csv(path: Path, rows: list[Row]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
