"""How random the loader's orders are, for h5gds.bench.loader_epoch (part
randomness, CPU and numpy only): batch-composition statistics of each order
on a dataset sorted by label (rows bench=loader-randomness), and small
training runs, an MLP on generated data read through the loader, per order
and seed (rows bench=loader-accuracy: final test accuracy)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import h5gds

from .loader_epoch_rows import Row


def _orders_for_stats(n: int, row_bytes: int, window: int, buffer_windows: int, world: int, seed: int = 0
                      ) -> dict[str, np.ndarray]:
    """Rank 0's order of epoch 0 for each order (no files: the plans only)."""
    from .. import _loader_order as orders
    win = orders.windows_from_boundaries([orders.aligned_boundaries(0, n, 4096, row_bytes, window)])
    out = {"exact": orders.exact_order(n, seed, 0, True, 0, world),
           "sequential": orders.exact_order(n, seed, 0, False, 0, world)}
    for d in sorted({1, 4, 16, buffer_windows}):
        plan = orders.windowed_plan(win, n, seed, 0, True, 0, world, d * window,
                                    lambda a, b: (b - a) * row_bytes)
        out[f"windowed-{d}"] = plan.order
    return out


def randomness_stats(rows: list[Row], args: argparse.Namespace) -> None:
    """Batch composition of each order, on the geometry of the epoch
    benchmark (--file-size of 6 KiB samples, the loader's default window
    and buffer), labels sorted (10 classes in blocks): the worst case."""
    from .._loader import DEFAULT_BUFFER_WINDOWS, DEFAULT_WINDOW
    from .._loader_randomness import batch_stats
    window = args.window or DEFAULT_WINDOW
    bufw = max(1, (args.buffer // window) if args.buffer else DEFAULT_BUFFER_WINDOWS)
    for sample in (6 << 10, 64 << 10):
        n = args.file_size // sample
        labels = (np.arange(n) * 10 // n).astype(np.int64)
        for world in (1, 8):
            for bsz in sorted({256, max(1, args.batch // sample)}):
                for name, order in _orders_for_stats(n, sample, window, bufw, world).items():
                    st = batch_stats(order, bsz, n, labels, window_rows=max(1, window // sample))
                    head = f"randomness {sample >> 10:3d} KiB world {world} batch {bsz:5d} {name:12s}"
                    if st["batches"] == 0:
                        # a small file over many ranks: rank 0's share holds no whole batch, so
                        # batch_stats has no batch to measure (and none of its statistics)
                        note = f"skipped: rank 0's order has {len(order)} samples, fewer than a batch"
                        print(f"{head} {note}", flush=True)
                    else:
                        note = ";".join(f"{k}={v:.4g}" for k, v in st.items() if isinstance(v, float))
                        print(f"{head} label_tv {st['label_tv']:.3f} (uniform {st['label_tv_uniform']:.3f}) "
                              f"spread {st['spread']:.3f} windows/batch {st.get('windows_per_batch', 0):.1f} "
                              f"neighbours {st['same_batch_neighbours']:.4f}", flush=True)
                    rows.append({"bench": "loader-randomness", "method": "order-statistics", "order": name,
                                 "sample": f"{sample >> 10}KiB", "sample_bytes": sample, "cache": "-",
                                 "GBps": float("nan"), "samples_per_s": float("nan"), "seconds": float("nan"),
                                 "bytes": n * sample, "epoch_fraction": 1.0, "repeat": 0,
                                 "note": f"world={world};batch={bsz};" + note})


def generated_dataset(path: Path, n: int, dims: int = 32, classes: int = 10, seed: int = 0, noise: float = 2.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A classification task (two Gaussian clusters per class, overlapping
    enough that an MLP reaches about 77%, not 100%), training set written
    to `path` sorted by label; returns the training and test sets."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 1.0, (classes, 2, dims)).astype(np.float32)

    def draw(m: int, r: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        y = np.repeat(np.arange(classes), m // classes)
        x = centers[y, r.integers(0, 2, len(y))] + r.normal(0, noise, (len(y), dims)).astype(np.float32)
        return x.astype(np.float32), y.astype(np.int64)

    xtr, ytr = draw(n, np.random.default_rng(seed + 1))
    xte, yte = draw(max(classes, n // 5), np.random.default_rng(seed + 2))
    with h5py.File(path, "w") as f:
        f["x"] = xtr
        f["y"] = ytr
    return xtr, ytr, xte, yte


def train_mlp(loader: Any, epochs: int, dims: int, classes: int, seed: int, lr: float = 0.05,
              hidden: int = 64) -> list[np.ndarray]:
    """SGD with momentum on a one-hidden-layer MLP (numpy), batches from `loader`."""
    rng = np.random.default_rng(seed)
    w1 = (rng.normal(0, 1, (dims, hidden)) / np.sqrt(dims)).astype(np.float32)
    w2 = (rng.normal(0, 1, (hidden, classes)) / np.sqrt(hidden)).astype(np.float32)
    params = [w1, np.zeros(hidden, np.float32), w2, np.zeros(classes, np.float32)]
    vel = [np.zeros_like(p) for p in params]
    for e in range(epochs):
        loader.set_epoch(e)
        for x, y in loader:
            w1, b1, w2, b2 = params
            h = x @ w1 + b1
            a = np.maximum(h, 0)
            z = a @ w2 + b2
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(y)), y] -= 1
            p /= len(y)
            ga = p @ w2.T
            ga[h <= 0] = 0
            for v, q, g in zip(vel, params, (x.T @ ga, ga.sum(0), a.T @ p, p.sum(0))):
                v *= 0.9
                v -= lr * g
                q += v
    return params


def accuracy(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    w1, b1, w2, b2 = params
    return float(((np.maximum(x @ w1 + b1, 0) @ w2 + b2).argmax(axis=1) == y).mean())


def accuracy_runs(path: Path, xte: np.ndarray, yte: np.ndarray, orders: dict[str, dict[str, Any]], seeds: int,
                  epochs: int, batch: int, dims: int = 32, classes: int = 10) -> dict[str, list[float]]:
    """Final test accuracy per order (keyword arguments of the Loader) and seed."""
    out: dict[str, list[float]] = {}
    with h5py.File(path, "r") as f:
        for name, kw in orders.items():
            accs = []
            for s in range(seeds):
                ld = h5gds.Loader((f["x"], f["y"]), batch, seed=s, like="numpy", **kw)
                accs.append(accuracy(train_mlp(ld, epochs, dims, classes, seed=s), xte, yte))
                ld.close()
            out[name] = accs
    return out


def accuracy_orders(n: int, row_bytes: int, windows: int, buffer_windows: list[int]) -> dict[str, dict[str, Any]]:
    """The orders of the accuracy runs: exact, windowed with `windows`
    windows over the dataset and each buffer depth, sequential."""
    window = max(row_bytes, n * row_bytes // windows)
    out: dict[str, dict[str, Any]] = {"exact": {"order": "exact"}}
    for d in buffer_windows:
        out[f"windowed-{d}"] = {"order": "windowed", "window": window, "buffer": d * window, "cache": "off"}
    out["sequential"] = {"order": "exact", "shuffle": False}
    return out


def randomness_accuracy(rows: list[Row], args: argparse.Namespace) -> None:
    """The training runs: 60,000 samples in 512 windows (as 4 GiB of 6 KiB
    samples in 8 MiB windows), windowed buffers of 1, 4, 16 and the
    default 64 windows, 3 epochs at a constant learning rate (the last
    batches weigh most: a worst case for a biased order)."""
    from .._loader import DEFAULT_BUFFER_WINDOWS
    path = Path(args.dir) / "loader-accuracy.h5"
    n, epochs, batch = 60000, 3, 128
    _, _, xte, yte = generated_dataset(path, n)
    orders = accuracy_orders(n, 32 * 4, 512, sorted({1, 4, 16, DEFAULT_BUFFER_WINDOWS}))
    t0 = time.perf_counter()
    res = accuracy_runs(path, xte, yte, orders, args.accuracy_seeds, epochs, batch)
    for name, accs in res.items():
        for s, a in enumerate(accs):
            rows.append({"bench": "loader-accuracy", "method": "mlp-numpy", "order": name, "sample": "128B",
                         "sample_bytes": 128, "cache": "-", "GBps": float("nan"), "samples_per_s": float("nan"),
                         "seconds": float("nan"), "bytes": n * 128, "epoch_fraction": float(epochs), "repeat": s,
                         "note": f"test_accuracy={a:.4f};epochs={epochs};batch={batch};samples={n};windows=512"})
        print(f"accuracy {name:12s} mean {np.mean(accs):.4f} sd {np.std(accs, ddof=1) if len(accs) > 1 else 0:.4f} "
              f"({', '.join(f'{a:.4f}' for a in accs)})", flush=True)
    print(f"accuracy runs: {time.perf_counter() - t0:.1f} s", flush=True)
    path.unlink()
