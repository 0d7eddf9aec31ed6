"""The benchmark's own code paths on host arrays (--host), tiny sizes: the
rows the GPU run relies on are written. No timings are checked."""
import csv
import os

import pytest

from h5gds.bench import __main__ as bench


def _fadvise_only(path):
    bench.fadvise_dontneed(path)
    return "fadvise"


def test_loader_and_train_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "drop_cache", _fadvise_only)  # never the machine's whole page cache
    rc = bench.main(["loader,loader-train", "--host", "--samples", "64KiB,4KiB", "--file-size", "8MiB", "--batch",
                     "1MiB", "--read-bytes", "2MiB", "--warm-read-bytes", "4MiB", "--repeat", "2", "--train-batches", "3", "--train-step-ms", "1",
                     "--dir", str(tmp_path), "--out", str(tmp_path)])
    assert rc == 0
    rows = list(csv.DictReader(open(tmp_path / "bench.csv")))
    got = {(r["bench"], r["method"], r["sample_bytes"], r["cache"]) for r in rows}
    for sample in ("65536", "4096"):
        for cache in ("cold", "warm"):
            assert ("loader", "h5gds-loader", sample, cache) in got
            assert ("loader", "h5py-fancy", sample, cache) in got
            assert ("loader-train", "h5gds-loader", sample, cache) in got
        assert ("loader", "ceiling-odirect", sample, "cold") in got
        assert ("loader", "ceiling-buffered", sample, "warm") in got
        assert ("loader-train", "compute-only", sample, "-") in got
    assert len([r for r in rows if r["method"] == "h5gds-loader" and r["bench"] == "loader"]) == 2 * 2 * 2
    med = list(csv.DictReader(open(tmp_path / "bench-median.csv")))
    train = [r for r in med if r["bench"] == "loader-train" and r["method"] == "h5gds-loader"]
    assert len(train) == 4 and all(r["overhead_pct"] and r["repeats"] == "2" for r in train)


def test_whole_rows_with_and_without_the_c_bench(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "drop_cache", _fadvise_only)
    exe = os.environ.get("H5GDS_C_BENCH")
    monkeypatch.delenv("H5GDS_C_BENCH", raising=False)
    args = ["whole", "--host", "--sizes", "4MiB", "--repeat", "1", "--dir", str(tmp_path), "--out", str(tmp_path)]
    assert bench.main(args + ["--c-bench", ""]) == 0
    rows = list(csv.DictReader(open(tmp_path / "bench.csv")))
    assert any(r["method"] == "c-h5gds-bench-gds" and r["note"].startswith("skipped") for r in rows)
    assert {r["cache"] for r in rows if r["method"] == "h5gds"} == {"durable-write", "cold", "warm"}
    fake = tmp_path / "fails.sh"
    fake.write_text("#!/bin/sh\necho 'no such thing' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(SystemExit, match="failed"):
        bench.main(args + ["--c-bench", str(fake)])
    if not exe:
        pytest.skip("H5GDS_C_BENCH (a built tools/h5gds-bench) not set: the C rows are not checked")
    assert bench.main(args + ["--c-bench", exe]) == 0
    rows = list(csv.DictReader(open(tmp_path / "bench.csv")))
    c = {r["cache"] for r in rows if r["method"] == "c-h5gds-bench-gds"}
    assert c == {"durable-write", "cold", "warm"}
