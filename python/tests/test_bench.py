"""The benchmark's own code paths on host arrays (--host), tiny sizes: the
rows the GPU run relies on are written. No timings are checked."""
import csv
import os
import subprocess
import sys

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


# ---- the command line: every wrong argument is one line on stderr, exit 2 ----

BAD_ARGS = [
    (["loader", "--samples", "100Kb"], "lowercase b"),
    (["loader", "--samples", "1.5MiB"], "not a size"),
    (["loader", "--batch", "16XB"], "not a size"),
    (["whole", "--sizes", "1GiB,"], "not a size"),
    (["whole", "--sizes", "0"], "more than 0"),
    (["loader", "--file-size", "8MiB", "--samples", "16MiB"], "does not fit"),
    (["loader", "--prefetch", "0"], "less than 1"),
    (["loader", "--repeat", "two"], "not a whole number"),
    (["loader", "--train-step-ms", "-1"], "positive"),
    (["louder"], "unknown part 'louder'"),
    (["loader", "--methods", "h5gds-loader,fast"], "unknown method 'fast'"),
    (["loader", "--config", "threads=many"], "'threads' = 'many' is not a whole number"),
    (["whole", "--c-bench", "/nonexistent/h5gds-bench"], "not an executable"),
    (["loader", "--dir", "/proc/no/such/dir"], "cannot make directory"),
    (["loader", "--no-such-option"], "unrecognized arguments"),
    ([], "required: parts"),
]


@pytest.mark.parametrize("argv,why", BAD_ARGS, ids=[" ".join(a) or "none" for a, _ in BAD_ARGS])
def test_a_wrong_argument_is_one_line(argv, why, tmp_path, capsys, monkeypatch):
    # in this process: any exception but argparse's exit fails the test; an
    # argument let through runs a tiny benchmark in tmp_path (the case's own
    # options come last and win)
    monkeypatch.setattr(bench, "drop_cache", _fadvise_only)
    small = ["--sizes", "1MiB", "--samples", "4KiB", "--file-size", "1MiB", "--batch", "64KiB", "--read-bytes",
             "64KiB", "--warm-read-bytes", "64KiB", "--repeat", "1", "--dir", str(tmp_path), "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as done:
        bench.main(["--host", *small, *argv])
    assert done.value.code == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("python -m h5gds.bench: error: ") and why in lines[0], lines[0]
    assert not (tmp_path / "bench.csv").exists()


def test_the_cli_reports_a_bad_size_in_one_line(tmp_path):
    """As a user runs it: no traceback, no figure of nothing."""
    done = subprocess.run([sys.executable, "-m", "h5gds.bench", "loader", "--samples", "100Kb", "--host", "--file-size",
                           "1MiB", "--dir", str(tmp_path), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "lowercase b, which can mean bits" in done.stderr, done.stderr


def test_sizes_in_every_unit_of_the_configuration(tmp_path, monkeypatch):
    """100KB (decimal) and 4K (binary) samples: the sizes the driver's configuration accepts."""
    monkeypatch.setattr(bench, "drop_cache", _fadvise_only)
    rc = bench.main(["loader", "--host", "--samples", "100KB,4K", "--file-size", "2MB", "--batch", "256KiB",
                     "--read-bytes", "512KiB", "--warm-read-bytes", "1MiB", "--repeat", "1",
                     "--methods", "h5gds-loader,h5py-fancy", "--dir", str(tmp_path), "--out", str(tmp_path)])
    assert rc == 0
    rows = list(csv.DictReader(open(tmp_path / "bench.csv")))
    assert {r["sample_bytes"] for r in rows if r["method"] == "h5gds-loader"} == {"100000", "4096"}


def test_nothing_to_plot_is_not_an_error(tmp_path, capsys):
    png = tmp_path / "bench.png"
    skipped = bench.row("loader", "kvikio-pread", 0, "-", float("nan"), float("nan"), note="skipped")
    bench.plot([skipped], png)
    bench.plot([], png)
    assert "no measurements to plot" in capsys.readouterr().out
    assert not png.exists()


def test_plot_of_measurements(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    rows = [bench.row("loader", m, 4096, c, 1e9, 1e5) for m in ("a", "b") for c in ("cold", "warm")]
    bench.plot(rows + [bench.row("loader", "kvikio-pread", 0, "-", float("nan"), float("nan"))], png)
    assert png.stat().st_size > 0
