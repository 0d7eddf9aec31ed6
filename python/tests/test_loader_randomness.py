"""How random the windowed order is, measured: batch composition on a
dataset stored sorted by label (the worst case for reading in windows),
and a small training run through the loader whose accuracy with the
windowed order must match the exact shuffle's (and with a sequential pass,
must not). The full measurement: python -m h5gds.bench.loader_epoch randomness."""
import numpy as np
import pytest

from h5gds import _loader_order as orders
from h5gds._loader import DEFAULT_BUFFER_WINDOWS
from h5gds._loader_randomness import batch_stats
from h5gds.bench import loader_epoch


def _sorted_plan_stats(world, buffer_windows, batch=256):
    # 4 GiB of 6 KiB samples in 8 MiB windows (512 windows), labels sorted in 10 blocks
    row, window = 6 << 10, 8 << 20
    n = (4 << 30) // row
    labels = (np.arange(n) * 10 // n).astype(np.int64)
    win = orders.windows_from_boundaries([orders.aligned_boundaries(0, n, 4096, row, window)])
    out = {}
    for name, d in (("windowed", buffer_windows), ("windowed-4", 4)):
        plan = orders.windowed_plan(win, n, 0, 0, True, 0, world, d * window, lambda a, b: (b - a) * row)
        out[name] = batch_stats(plan.order, batch, n, labels, window_rows=window // row)
    out["exact"] = batch_stats(orders.exact_order(n, 0, 0, True, 0, world), batch, n, labels,
                               window_rows=window // row)
    out["sequential"] = batch_stats(orders.exact_order(n, 0, 0, False, 0, world), batch, n, labels,
                                    window_rows=window // row)
    return out


@pytest.mark.parametrize("world", [1, 8])
def test_batch_composition_on_sorted_labels(world):
    st = _sorted_plan_stats(world, DEFAULT_BUFFER_WINDOWS)
    # the exact shuffle's label mix is the sampling noise of a batch of 256 (TV about 0.07)
    assert abs(st["exact"]["label_tv_excess"]) < 0.01
    # the default windowed order: within 0.02 of it (measured 0.006-0.01), from dozens of windows per batch
    assert st["windowed"]["label_tv_excess"] < 0.02, st["windowed"]
    assert st["windowed"]["windows_per_batch"] > 40
    assert st["windowed"]["spread"] > 0.95
    assert abs(st["windowed"]["rank_corr"]) < 0.2  # no drift through the file over the epoch
    # the statistic sees what a poor order does: few windows per group, a sequential pass
    assert st["windowed-4"]["label_tv_excess"] > 0.1
    assert st["sequential"]["label_tv_excess"] > 0.5
    assert st["sequential"]["rank_corr"] > 0.99


def test_stats_are_deterministic():
    a = _sorted_plan_stats(1, DEFAULT_BUFFER_WINDOWS)
    b = _sorted_plan_stats(1, DEFAULT_BUFFER_WINDOWS)
    assert a == b


def test_training_accuracy_windowed_matches_exact(tmp_path):
    """An MLP on a generated task stored sorted by label, trained through the
    loader (host arrays): the windowed order (the default buffer of 64
    windows, 512 windows over the dataset) reaches the exact shuffle's test
    accuracy; a sequential pass does not (the test can fail)."""
    path = tmp_path / "acc.h5"
    n = 30000
    _, _, xte, yte = loader_epoch.generated_dataset(path, n)
    runs = loader_epoch.accuracy_orders(n, 32 * 4, 512, [DEFAULT_BUFFER_WINDOWS])
    res = loader_epoch.accuracy_runs(path, xte, yte, runs, seeds=2, epochs=3, batch=128)
    exact, windowed, seq = (float(np.mean(res[k])) for k in ("exact", f"windowed-{DEFAULT_BUFFER_WINDOWS}",
                                                              "sequential"))
    assert exact > 0.7, res
    assert abs(windowed - exact) < 0.015, res
    assert seq < exact - 0.3, res


def test_stats_of_a_small_file_over_eight_ranks(tmp_path):
    """loader_epoch randomness --file-size 64MiB: at world size 8 a rank's
    share (128 samples of 64 KiB, 1366 of 6 KiB) is less than one batch
    (256; 2730 for 16 MiB batches of 6 KiB). Those cases are skipped with a
    note (they used to stop the run: KeyError 'label_tv'); the others are
    measured."""
    args = loader_epoch.parse_args(["randomness", "--file-size", "64MiB", "--dir", str(tmp_path),
                                    "--out", str(tmp_path)])
    rows: list[dict] = []
    loader_epoch.randomness_stats(rows, args)
    skipped = {(r["sample"], r["note"].split(";")[0], r["note"].split(";")[1]) for r in rows
               if "skipped" in r["note"]}
    assert skipped == {("64KiB", "world=8", "batch=256"), ("6KiB", "world=8", "batch=2730")}
    measured = [r for r in rows if "skipped" not in r["note"]]
    assert {(r["sample"], r["note"].split(";")[0]) for r in measured} == {
        ("6KiB", "world=1"), ("6KiB", "world=8"), ("64KiB", "world=1")}
    assert all("label_tv=" in r["note"] for r in measured)
    # 6 orders each: 6 KiB at two world sizes and two batches (256, 2730), 64 KiB at two world sizes, one batch
    assert len(rows) == 6 * (2 * 2 + 2 * 1)



def test_median_rows_keeps_each_order_statistics_row():
    """loader-epoch-median.csv: rates become one median per configuration,
    while order statistics (one row per world size and batch) and
    accuracies (one per seed) stay row by row instead of collapsing into
    one arbitrary row."""
    from h5gds.bench.loader_epoch_rows import median_rows, row

    rates = [row("loader-epoch", "h5gds-loader", "windowed", "64KiB", 65536, "cold", 1 << 30, 16384, s, 1.0, i)
             for i, s in enumerate((1.0, 2.0, 4.0))]
    stats = [{"bench": "loader-randomness", "method": "order-statistics", "order": "windowed", "sample": "64KiB",
              "cache": "-", "GBps": float("nan"), "samples_per_s": float("nan"), "seconds": float("nan"),
              "repeat": 0, "note": f"world={w};batch={b}"} for w in (1, 8) for b in (256, 2730)]
    out = median_rows(rates + stats)
    epoch = [r for r in out if r["bench"] == "loader-epoch"]
    assert len(epoch) == 1 and epoch[0]["repeat"] == 3 and epoch[0]["seconds"] == 2.0
    kept = [r["note"] for r in out if r["bench"] == "loader-randomness"]
    assert kept == [s["note"] for s in stats]
