"""The `whole` benchmark: a dataset written (durable: fsync before the clock
stops), read cold (page cache dropped) and warm, through h5gds.write/read
into device arrays, beside h5py + cupy (a host array, then a copy to the
device), with the C benchmark's GDS figures (h5gds-bench --methods GDS) of
the same size and repeat run right before (rows method=c-h5gds-bench-gds).
Rows: bench=whole, cache durable-write, cold, warm."""
from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path
from typing import Any, Callable

import h5py

import h5gds

from . import _common
from ._common import Row, fsync_path, print_row, row, timed
from ._device import Device


def run_c_bench(args: argparse.Namespace, dev: Device, rows: list[Row], nbytes: int, rep: int) -> None:
    """The C benchmark's GDS figures (h5gds-bench --methods GDS) for one size,
    run right before the Python API's measurement of the same size and
    repeat, so that both share the machine's state and the disk's drift:
    rows method=c-h5gds-bench-gds."""
    import subprocess
    import tempfile
    exe = args.c_bench or os.environ.get("H5GDS_C_BENCH", "")
    if not exe:
        if not any(r["method"] == "c-h5gds-bench-gds" for r in rows):
            rows.append(row("whole", "c-h5gds-bench-gds", 0, "-", float("nan"), float("nan"),
                            note="skipped: no --c-bench (path of tools/h5gds-bench)"))
            print("whole: the C bench skipped (no --c-bench)", flush=True)
        return
    memory = "host" if dev.name == "numpy" else "device"
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out_csv = Path(tmp) / "c.csv"
        cmd = [exe, "--sizes", str(nbytes), "--methods", "GDS", "--repeat", "1", "--no-ceilings",
               "--memory", memory, "--dir", tmp, "--csv", str(out_csv)]
        print("whole: " + " ".join(cmd), flush=True)
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0 or not out_csv.exists():
            tail = " | ".join(done.stdout.strip().splitlines()[-5:])
            raise SystemExit(f"whole: {exe} failed ({done.returncode}): {tail}")
        phases = {"write": "durable-write", "cold_read": "cold", "warm_read": "warm"}
        with open(out_csv, newline="") as f:
            for r in csv.DictReader(f):
                if r["method"] != "GDS" or r["phase"] not in phases:
                    continue
                secs = float(r["seconds"])
                rows.append(row("whole", "c-h5gds-bench-gds", int(r["size_bytes"]), phases[r["phase"]],
                                float(r["rate_GBps"]) * 1e9, 1 / secs if secs else float("nan"), rep,
                                f"C bench, {r['memory']} memory, {r['driver_config']}"
                                + (f", {r['cold_cache']}" if r["phase"] == "cold_read" else "")))
                print_row(rows[-1:])


def run(args: argparse.Namespace, dev: Device, rows: list[Row],
        drop_cache: Callable[[Path], str] = _common.drop_cache) -> None:
    """Each of --sizes, --repeat times; drop_cache: how a cold read starts
    (the caller may keep the machine's page cache, as the tests do)."""
    sizes = args.sizes
    # Untimed: the engine's workers pin their staging rings on first use (up to
    # a second for sixteen), which the first measurement would otherwise pay
    # (the C bench warms up the same way); 512 MiB gives every worker a block.
    warm_path = Path(args.dir) / "whole-warm-up.h5"
    with h5py.File(warm_path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=dev.random(min(max(sizes), 512 << 20)))
    warm_path.unlink()
    for nbytes in sizes:
        path = Path(args.dir) / f"whole-{nbytes}.h5"
        data = dev.random(nbytes)
        out = dev.empty(nbytes)

        def gds_write() -> None:
            with h5py.File(path, "w", driver="gds") as f:
                h5gds.create_dataset(f, "x", data=data)
            fsync_path(path)

        def gds_read() -> None:
            with h5py.File(path, "r", driver="gds") as f:
                h5gds.read(f["x"], out=out)

        def peer_write() -> None:
            host = dev.to_host(data)
            with h5py.File(path, "w") as f:
                f.create_dataset("x", data=host)
            fsync_path(path)

        peer_out: list[Any] = []

        def peer_read() -> None:
            with h5py.File(path, "r") as f:
                peer_out[:] = [dev.from_host(f["x"][()])]

        for rep in range(args.repeat):
            # the C bench's figures first, then each Python method, per
            # repeat: neighbours in time (the disk's write rate drifts)
            peer_out.clear()  # the C bench needs device memory of its own
            dev.free_cached()
            run_c_bench(args, dev, rows, nbytes, rep)
            for method, write, read in (("h5gds", gds_write, gds_read), ("h5py+cupy", peer_write, peer_read)):
                if path.exists():
                    path.unlink()
                # as the C bench does: the previous file's blocks are freed
                # and other dirty data written before the clock starts
                os.sync()
                t = timed(write, dev)
                rows.append(row("whole", method, nbytes, "durable-write", nbytes / t, 1 / t, rep))
                how = drop_cache(path)
                t = timed(read, dev)
                rows.append(row("whole", method, nbytes, "cold", nbytes / t, 1 / t, rep, how))
                t = timed(read, dev)
                rows.append(row("whole", method, nbytes, "warm", nbytes / t, 1 / t, rep))
                got = out if method == "h5gds" else peer_out[0]
                if not dev.equal(got, data):
                    raise SystemExit(f"whole {method} {nbytes}: data read differs from data written")
                print_row(rows[-3:])
        path.unlink()
        del data, out


def compare_with_c(medians: list[Row]) -> None:
    """Python API / C benchmark, GDS, same run (the goal: within 10%)."""
    c = {(m["sample_bytes"], m["cache"]): m["GBps"] for m in medians
         if m["bench"] == "whole" and m["method"] == "c-h5gds-bench-gds"}
    for m in medians:
        key = (m["sample_bytes"], m["cache"])
        if m["bench"] == "whole" and m["method"] == "h5gds" and c.get(key):
            print(f"whole {m['sample_bytes'] >> 20} MiB {m['cache']}: Python {m['GBps']:.3f} / C {c[key]:.3f} GB/s "
                  f"= {m['GBps'] / c[key]:.2f}", flush=True)
