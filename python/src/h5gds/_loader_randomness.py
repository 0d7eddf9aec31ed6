"""How random an epoch order is, measured on its batches (numpy only).

For an order (the global sample indices one rank yields, in order) cut into
batches:

* ``label_tv``: the total variation distance between a batch's label mix
  and the whole dataset's, averaged over batches (0: every batch has the
  dataset's mix; an exact shuffle's value is the sampling noise of a batch
  of that size);
* ``label_tv_excess``: ``label_tv`` minus the value expected of uniform
  batches of the same size (estimated with a seeded permutation), so 0 is
  "as mixed as an exact shuffle";
* ``spread``: the standard deviation of a batch's sample positions over
  that of uniform positions, sqrt((n^2 - 1) / 12), averaged (about 1 for
  batches drawn from the whole dataset, small for batches of neighbours);
* ``windows_per_batch``: distinct windows (runs of ``window_rows`` samples)
  a batch draws from, averaged (exact: about min(batch, windows));
* ``rank_corr``: Spearman correlation between a sample's place in the epoch
  and its index in the dataset (0 for no drift through the file, 1 for a
  sequential pass);
* ``same_batch_neighbours``: the fraction of file neighbours (i, i + 1)
  that land in the same batch (an exact shuffle: about batch / n).
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _tv(order: np.ndarray, batch_size: int, labels: np.ndarray, classes: int) -> float:
    nb = len(order) // batch_size
    if nb == 0:
        return float("nan")
    lab = labels[order[: nb * batch_size]].reshape(nb, batch_size)
    counts = np.zeros((nb, classes), np.float64)
    np.add.at(counts, (np.repeat(np.arange(nb), batch_size), lab.ravel()), 1.0)
    mix = counts / batch_size
    whole = np.bincount(labels, minlength=classes) / len(labels)
    return float(0.5 * np.abs(mix - whole[None, :]).sum(axis=1).mean())


def batch_stats(order: np.ndarray, batch_size: int, n: int, labels: np.ndarray | None = None,
                window_rows: int | None = None, seed: int = 0) -> dict[str, Any]:
    """The statistics above for one order of `n` samples (see the module)."""
    order = np.asarray(order, np.int64)
    nb = len(order) // batch_size
    out: dict[str, Any] = {"batches": nb, "batch_size": batch_size}
    if nb == 0:
        return out
    full = order[: nb * batch_size].reshape(nb, batch_size)
    uniform_sd = np.sqrt((float(n) ** 2 - 1) / 12) if n > 1 else 1.0
    out["spread"] = float(full.std(axis=1).mean() / uniform_sd)
    if window_rows:
        w = full // int(window_rows)
        ws = np.sort(w, axis=1)
        out["windows_per_batch"] = float((1 + (np.diff(ws, axis=1) != 0).sum(axis=1)).mean())
    r1 = np.argsort(np.argsort(order)).astype(np.float64)  # ranks of the indices
    r2 = np.arange(len(order), dtype=np.float64)           # places in the epoch
    if len(order) > 1:
        out["rank_corr"] = float(np.corrcoef(r1, r2)[0, 1])
    batch_of = np.full(n, -1, np.int64)
    batch_of[full.ravel()] = np.repeat(np.arange(nb), batch_size)
    a, b = batch_of[:-1], batch_of[1:]
    both = (a >= 0) & (b >= 0)
    out["same_batch_neighbours"] = float((a[both] == b[both]).mean()) if both.any() else float("nan")
    if labels is not None:
        labels = np.asarray(labels, np.int64)
        classes = int(labels.max()) + 1
        tv = _tv(order, batch_size, labels, classes)
        ref_order = np.random.default_rng(seed).permutation(n)[: len(order)]
        ref = _tv(ref_order, batch_size, labels, classes)
        out["label_tv"] = tv
        out["label_tv_uniform"] = ref
        out["label_tv_excess"] = tv - ref
    return out
