"""The ``compressed`` benchmark's loader part: whole epochs of samples out of
a compressed dataset into device batches, cold and warm, beside
DataLoader + h5py and the file's O_DIRECT sequential read.

  h5gds-loader           h5gds.Loader, windowed order, CuPy batches: whole
                         stored chunks read by the engine, decoded on the GPU
  torch-dataloader-h5py  torch DataLoader (8 workers, pinned) over h5py reads
                         of single samples (HDF5's CPU filters; each sample
                         decodes its chunk unless the chunk cache holds it)
  ceiling-odirect        O_DIRECT sequential read of the file (file bytes)
  h5gds-loader-train     (--loader-step-ms) a cold epoch of a training loop:
                         per batch that many ms of GPU compute and a read of
                         the batch (loss.item()), beside compute-only: the
                         same steps on one batch already on the GPU

Rows: bench,method,data,filter,ratio,cache,GBps,repeat plus sample_bytes,
chunk_bytes, seconds, epoch_fraction (GB/s of decoded samples delivered),
window_bytes (the loader's windows; --loader-windows tries several),
variant (--loader-variants: environment settings such as
H5GDS_CONFIG=threads=8 beside the default; NAME=VALUE+NAME=VALUE sets
several), decode_seconds (h5gds-loader: the epoch's time the caller's
thread spent beginning and ending the GPU decodes, waiting for them
included)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import h5gds

from . import _common as common
from .compressed import DTYPES, filter_kwargs, make_rows

COLUMNS = ["bench", "method", "data", "filter", "ratio", "cache", "GBps", "repeat", "sample_bytes", "chunk_bytes",
           "seconds", "epoch_fraction", "window_bytes",
           "variant", "decode_seconds"]


def sample_file(path: Path, kind: str, fname: str, sample: int, chunk: int, nbytes: int) -> float | None:
    """Samples of `sample` bytes (rows), compressed in chunks of whole rows
    of about `chunk` bytes; returns the ratio (None: filter not installed)."""
    kw = filter_kwargs(fname)
    if kw is None:
        return None
    dtype = np.dtype(DTYPES[kind])
    width = max(1, sample // dtype.itemsize)
    rows_per_chunk = max(1, chunk // (width * dtype.itemsize))
    nrows = max(rows_per_chunk, nbytes // (width * dtype.itemsize))
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(nrows, width), dtype=dtype, chunks=(rows_per_chunk, width), **kw)
        step = max(rows_per_chunk, (64 << 20) // (width * dtype.itemsize) // rows_per_chunk * rows_per_chunk)
        for r in range(0, nrows, step):
            n = min(step, nrows - r)
            d[r:r + n] = make_rows(kind, r, n, width, rng)
    return nrows * width * dtype.itemsize / os.path.getsize(path)


class _Rows:
    """torch Dataset of single rows read with h5py (a file per worker)."""

    def __init__(self, path: str):
        self.path = path
        self.f: h5py.File | None = None
        with h5py.File(path, "r") as f:
            self.n = f["x"].shape[0]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        import torch
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["x"][i])


def run(args: Any, nbytes: int, out_dir: Path, work: Path) -> int:
    import cupy

    csv_path = out_dir / "compressed-loader.csv"
    table = common.CsvRows(csv_path, COLUMNS)
    rows = table.rows

    def add(**r: Any) -> None:
        table.add({"bench": "compressed-loader", "window_bytes": "", "variant": "", "decode_seconds": "", **r})

    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False

    def peers(path: Path, cache: str, prepare: Any, rep: int, n: int, row_bytes: int, bsz: int,
              base: dict[str, Any]) -> None:
        """DataLoader + h5py over a part of the epoch; the file's O_DIRECT read (cold)."""
        if have_torch:
            import torch
            part = max(bsz, min(n, int(args.loader_dataloader_bytes // row_bytes)))
            order = np.random.default_rng(rep).permutation(n)[:part]
            dl = torch.utils.data.DataLoader(_Rows(str(path)), batch_size=bsz, sampler=order.tolist(),
                                             num_workers=8, pin_memory=True)
            prepare()
            cnt = [0]

            def dl_part() -> None:
                for b in dl:
                    b.cuda(non_blocking=True)
                    cnt[0] += int(b.shape[0])
                torch.cuda.synchronize()
            t = common.timed(dl_part)
            add(method="torch-dataloader-h5py", cache=cache, GBps=f"{cnt[0] * row_bytes / t / 1e9:.3f}",
                repeat=rep, seconds=f"{t:.3f}", epoch_fraction=f"{cnt[0] / n:.3f}", **base)
        if cache == "cold":
            stored = os.path.getsize(path)
            block = 16 << 20
            offsets = np.arange(0, stored // block * block, block, dtype=np.uint64)
            if len(offsets):
                common.drop_cache(path)
                t = common.ceiling_seconds(path, True, 16, block, offsets)
                add(method="ceiling-odirect", cache=cache, GBps=f"{len(offsets) * block / t / 1e9:.3f}",
                    repeat=rep, seconds=f"{t:.3f}", epoch_fraction="1.000", **base)

    compute = None
    if args.loader_step_ms > 0:
        from ._device import Device
        from .loader_train import StepCompute
        compute = StepCompute(Device(), args.loader_step_ms)
    chunk = args.loader_chunk
    windows: list[int | None] = list(args.loader_windows) or [None]
    variants = [v.strip() for v in args.loader_variants.split(";") if v.strip()] or ["default"]
    for v in variants:
        if v != "default" and not all("=" in a for a in v.split("+")):
            raise SystemExit(f"--loader-variants: {v!r}: 'default' or NAME=VALUE[+NAME=VALUE...]")
    print(",".join(COLUMNS), flush=True)
    for kind in args.loader_data.split(","):
        for fname in args.loader_filters.split(","):
            for sample in args.loader_samples:
                path = work / f"h5gds-compressed-loader-{kind}-{fname}-{sample}.h5"
                ratio = sample_file(path, kind, fname, sample, chunk, nbytes)
                if ratio is None:
                    print(f"# {fname}: hdf5plugin not installed, skipped", flush=True)
                    continue
                with h5py.File(path, "r") as f:
                    n, width = f["x"].shape
                    row_bytes = width * f["x"].dtype.itemsize
                    chunk_bytes = f["x"].chunks[0] * row_bytes
                total = n * row_bytes
                bsz = max(1, (16 << 20) // row_bytes)
                base = dict(data=kind, filter=fname, ratio=f"{ratio:.2f}", sample_bytes=row_bytes,
                            chunk_bytes=chunk_bytes)
                decoded = []
                for wi, (window, variant) in enumerate((w, v) for w in windows for v in variants):
                    settings = [] if variant == "default" else [a.partition("=")[::2] for a in variant.split("+")]
                    saved = {name: os.environ.get(name) for name, _ in settings}
                    for name, value in settings:
                        os.environ[name] = value
                    ld = h5gds.Loader([str(path)], bsz, dataset="x", like="cupy", seed=1, cache="off",
                                      window=window)
                    it = iter(ld)                     # untimed: buffers, engine threads, the codec
                    next(it)
                    it.close()
                    for rep in range(args.repeat):
                        for cache in ("cold", "warm"):
                            def prepare() -> None:
                                if cache == "cold":
                                    common.drop_cache(path)
                                else:
                                    common.warm(path)
                            prepare()
                            got = [0]
                            d0 = ld._decoder.decode_seconds

                            def epoch() -> None:
                                for b in ld:
                                    got[0] += int(b.shape[0])
                                cupy.cuda.runtime.deviceSynchronize()  # the last batch's gather counts
                            t = common.timed(epoch)
                            add(method="h5gds-loader", cache=cache, GBps=f"{got[0] * row_bytes / t / 1e9:.3f}",
                                repeat=rep, seconds=f"{t:.3f}", epoch_fraction=f"{got[0] / n:.3f}",
                                window_bytes=ld.window_bytes, variant=variant,
                                decode_seconds=f"{ld._decoder.decode_seconds - d0:.3f}", **base)
                            if wi == 0:
                                peers(path, cache, prepare, rep, n, row_bytes, bsz, base)
                        if compute is not None:  # a cold epoch of a training loop: compute per step
                            common.drop_cache(path)
                            seen = [0]

                            def train() -> None:
                                for b in ld:
                                    compute.step(b)
                                    seen[0] += int(b.shape[0])
                                cupy.cuda.runtime.deviceSynchronize()
                            t = common.timed(train)
                            steps = -(-seen[0] // bsz)
                            add(method="h5gds-loader-train", cache="cold", GBps=f"{seen[0] * row_bytes / t / 1e9:.3f}",
                                repeat=rep, seconds=f"{t:.3f}", epoch_fraction=f"{seen[0] / n:.3f}",
                                window_bytes=ld.window_bytes, variant=variant, **base)
                            if wi == 0:
                                one = iter(ld)
                                first = next(one)
                                one.close()

                                def compute_only() -> None:
                                    assert compute is not None
                                    compute.steps(first, steps)
                                    cupy.cuda.runtime.deviceSynchronize()
                                t = common.timed(compute_only)
                                del first
                                add(method="compute-only", cache="device", GBps=f"{seen[0] * row_bytes / t / 1e9:.3f}",
                                    repeat=rep, seconds=f"{t:.3f}", epoch_fraction=f"{seen[0] / n:.3f}", **base)
                    decoded.append(f"window {ld.window_bytes >> 20} MiB, {variant}: {ld._decoder.gpu_decoded} chunks "
                                   f"on the GPU, {ld._decoder.hdf5_decoded_rows} rows by HDF5")
                    ld.close()
                    for name, old in saved.items():
                        if old is None:
                            os.environ.pop(name, None)
                        else:
                            os.environ[name] = old
                print(f"# {kind}/{fname}/{row_bytes}: {total / 2**30:.2f} GiB, chunks {chunk_bytes >> 10} KiB, "
                      f"ratio {ratio:.2f}, batch {bsz}; " + "; ".join(decoded), flush=True)
                path.unlink()
    print(f"compressed-loader: {len(rows)} rows in {csv_path}; the goal's ratios in "
          f"{write_summary(rows, csv_path.with_name('compressed-loader-summary.md'))}")
    return 0


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def write_summary(rows: list[dict[str, Any]], path: Path) -> Path:
    """The loader goal's ratios from a compressed-loader.csv's rows (medians
    over repeats): per file, window and variant the loader's cold and warm
    epochs beside DataLoader + h5py and the O_DIRECT read x the ratio, and
    the training epoch beside compute alone where measured."""
    def med(method: str, key: tuple[str, str, str], cache: str, window: str = "", variant: str = "",
            column: str = "GBps") -> float | None:
        return _median([float(r[column]) for r in rows
                        if r["method"] == method and (r["data"], r["filter"], r["sample_bytes"]) == key
                        and r["cache"] == cache and (not window or r.get("window_bytes") == window)
                        and (not variant or r.get("variant") == variant)])

    def f(x: float | None, spec: str = ".2f") -> str:
        return "-" if x is None else format(x, spec)

    def ratio(a: float | None, b: float | None, spec: str = ".1f", suffix: str = "x") -> str:
        return "-" if a is None or not b else format(a / b, spec) + suffix

    lines = ["# compressed-loader: the goal's ratios", "",
             "Medians over repeats, GB/s of decoded samples delivered (the O_DIRECT read: GB/s of file bytes, "
             "x ratio for decoded bytes). Goal: h5gds >= 5x DataLoader + h5py, cold and warm.", "",
             "| data | filter | ratio | sample | window | variant | cold: **h5gds** | DataLoader + h5py | "
             "**h5gds / DataLoader** | O_DIRECT x ratio | h5gds / (O_DIRECT x ratio) | warm: **h5gds** | "
             "DataLoader + h5py | **h5gds / DataLoader** | train epoch / compute alone (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    seen: list[tuple[tuple[str, str, str], str, str]] = []
    for r in rows:
        if r["method"] != "h5gds-loader":
            continue
        entry = ((r["data"], r["filter"], r["sample_bytes"]), r.get("window_bytes", ""), r.get("variant", ""))
        if entry not in seen:
            seen.append(entry)
    for key, window, variant in seen:
        ratio_text = next(r["ratio"] for r in rows if (r["data"], r["filter"], r["sample_bytes"]) == key)
        cold, warm = med("h5gds-loader", key, "cold", window, variant), med("h5gds-loader", key, "warm", window, variant)
        dl_cold, dl_warm = med("torch-dataloader-h5py", key, "cold"), med("torch-dataloader-h5py", key, "warm")
        ceiling = med("ceiling-odirect", key, "cold")
        bound = ceiling * float(ratio_text) if ceiling is not None else None
        train = med("h5gds-loader-train", key, "cold", window, variant, column="seconds")
        alone = med("compute-only", key, "device", column="seconds")
        train_text = "-" if train is None else f"{train:.3f} / {f(alone, '.3f')}"
        sample = int(key[2])
        lines.append(f"| {key[0]} | {key[1]} | {ratio_text} | {sample >> 10} KiB | "
                     f"{int(window) >> 20 if window else '-'} MiB | {variant or '-'} | **{f(cold)}** | {f(dl_cold, '.3f')} | "
                     f"**{ratio(cold, dl_cold)}** | {f(bound)} | {ratio(cold, bound, '.2f', '')} | **{f(warm)}** | "
                     f"{f(dl_warm, '.3f')} | **{ratio(warm, dl_warm)}** | {train_text} |")
    path.write_text("\n".join(lines) + "\n")
    return path
