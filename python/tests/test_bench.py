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


# ---- the compressed benchmark's pieces that need no GPU ------------------------------

def _odirect_works(folder):
    """Whether files in `folder` open with O_DIRECT (tmpfs before Linux 6.6 refuses it: EINVAL)."""
    probe = folder / "odirect-probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644))
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)  # a refused open may still have created it


def test_ceiling_write_seconds_writes_every_block(tmp_path):
    """The write ceiling's native pwrite: the file holds every block (a gap
    between offsets included: the fallocate reserves it), none of its bytes
    zero, and the seconds are positive. O_DIRECT where the file system takes
    it (tmpfs may not), else the buffered writes of the same code."""
    import numpy as np

    from h5gds.bench._common import ceiling_write_seconds

    path = tmp_path / "ceiling-write.bin"
    block = 256 << 10
    offsets = np.array([0, block, 3 * block], dtype=np.uint64)  # the third block past a gap
    secs = ceiling_write_seconds(path, _odirect_works(tmp_path), 2, block, offsets)
    assert secs > 0
    assert path.stat().st_size == 4 * block
    data = np.fromfile(path, np.uint8)
    written = np.concatenate([data[:2 * block], data[3 * block:]])
    assert written.all(), "the ceiling writes non-zero bytes"
    # truncated when written again
    ceiling_write_seconds(path, False, 1, block, offsets[:1])
    assert path.stat().st_size == block


def test_ceiling_write_seconds_refuses_unaligned_direct_writes(tmp_path):
    import numpy as np

    from h5gds.bench._common import ceiling_write_seconds

    with pytest.raises(OSError, match="multiples of 4096"):
        ceiling_write_seconds(tmp_path / "x.bin", True, 1, 4096, np.array([100], dtype=np.uint64))


def _summary_table(lines, heading):
    """The table under `heading` of compressed-summary.md: one dict per row,
    column name -> cell (bold marks removed)."""
    start = lines.index(heading)
    header = next(i for i in range(start, len(lines)) if lines[i].startswith("| data"))
    names = [c.strip().replace("**", "") for c in lines[header].strip("|").split("|")]
    out = []
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        out.append(dict(zip(names, (c.strip().replace("**", "") for c in line.strip("|").split("|")))))
    return {(r["data"], r["filter"]): r for r in out}


def test_compressed_summary_ratios(tmp_path):
    from h5gds.bench import compressed

    def rows(method, data, filt, ratio, cache, *gbps):
        return [dict(bench="compressed", method=method, data=data, filter=filt, ratio=f"{ratio:.2f}", cache=cache,
                     GBps=f"{g:.3f}", repeat=i) for i, g in enumerate(gbps)]

    hand = (rows("h5gds", "field", "zstd", 3.0, "cold", 2.0, 4.0, 3.0)   # median 3
            + rows("ceiling-odirect", "field", "zstd", 3.0, "cold", 1.0)  # x ratio: 3
            + rows("ceiling-odirect", "field", "zstd", 3.0, "warm", 20.0)
            + rows("nvcomp-decode", "field", "zstd", 3.0, "device", 5.0, 6.0)  # 5.5
            + rows("h5gds", "field", "zstd", 3.0, "warm", 4.4)
            + rows("h5gds-raw", "field", "zstd", 3.0, "warm", 1.0, 1.2, 1.1)  # 1.1; x ratio: 3.3
            + rows("h5py", "field", "zstd", 3.0, "cold", 0.3)
            + rows("h5gds-write", "field", "zstd", 2.0, "write", 1.0, 2.0)  # 1.5; the GPU's ratio 2
            + rows("ceiling-odirect-write", "field", "zstd", 3.0, "write", 0.5, 0.5)  # x ratio: 1.5
            + rows("nvcomp-compress", "field", "zstd", 2.0, "device", 2.0, 2.4, 1.6)  # 2.0
            + rows("h5py-write", "field", "zstd", 3.0, "write", 0.5)
            + rows("h5gds", "image", "lz4", 2.0, "cold", 2.0)
            + rows("h5gds-write", "image", "lz4", 1.5, "write", 1.0)
            + rows("ceiling-odirect-write", "image", "lz4", 2.0, "write", 2.0))
    path = compressed.write_summary(hand, tmp_path / "compressed-summary.md")
    lines = path.read_text().splitlines()
    reads = _summary_table(lines, "## Reads into device memory")
    writes = _summary_table(lines, "## Durable writes from device memory")
    field, image = reads[("field", "zstd")], reads[("image", "lz4")]
    assert field["cold: h5gds"] == "3.00" and field["ceiling x ratio"] == "3.00"
    assert field["GPU decode alone"] == "5.50"
    assert field["h5gds / min(ceiling x ratio, decode)"] == "1.00"  # 3 / min(3, 5.5)
    assert field["warm h5gds / decode"] == "0.80"                   # 4.4 / 5.5
    assert field["warm I/O alone (file bytes)"] == "1.10"
    assert field["warm h5gds / min(I/O x ratio, decode)"] == "1.33"  # 4.4 / min(3.3, 5.5)
    assert field["h5gds / h5py"] == "10.0x"
    assert field["cpu16 cold"] == field["h5gds / cpu16"] == "-"    # not measured
    assert image["cold: h5gds"] == "2.00"
    assert image["h5gds / min(ceiling x ratio, decode)"] == image["warm h5gds / decode"] == "-"
    assert image["warm h5gds / min(I/O x ratio, decode)"] == "-"
    w = writes[("field", "zstd")]
    assert w["CPU ratio"] == "3.00" and w["GPU ratio"] == "2.00"  # the file read's, and what the GPU reached
    assert w["h5gds-write"] == "1.50" and w["ceiling x GPU ratio"] == "1.00" and w["GPU compress alone"] == "2.00"
    assert w["h5gds-write / min(ceiling x GPU ratio, compress)"] == "1.50"  # 1.5 / min(0.5 x 2, 2.0)
    assert w["h5gds-write / min(ceiling x CPU ratio, compress)"] == "1.00"  # 1.5 / min(0.5 x 3, 2.0)
    assert w["h5gds-write / h5py-write"] == "3.0x"
    wi = writes[("image", "lz4")]
    assert wi["CPU ratio"] == "2.00" and wi["GPU ratio"] == "1.50"
    assert wi["ceiling x GPU ratio"] == "3.00" and wi["GPU compress alone"] == "-"
    assert wi["h5gds-write / min(ceiling x GPU ratio, compress)"] == "-"  # no compress rate: no goal ratio
    # reads only: no write table
    only_reads = compressed.summary_lines([r for r in hand if not r["method"].endswith(("write", "compress"))])
    assert "## Durable writes from device memory" not in only_reads
    assert "## Reads into device memory" in only_reads


def test_compressed_plot_of_a_csv(tmp_path, capsys):
    """--plot CSV: no GPU, nothing measured: the summary (and, with
    matplotlib, the figure) written beside the CSV; a file that is not a
    compressed.csv is one line and exit 2."""
    from h5gds.bench import compressed

    src = tmp_path / "compressed.csv"
    rows = [dict(bench="compressed", method=m, data="field", filter="lz4", ratio=r, cache=c, GBps=g, repeat=0)
            for m, r, c, g in (("h5gds", "1.94", "cold", "3.3"), ("ceiling-odirect", "1.94", "cold", "1.7"),
                               ("nvcomp-decode", "1.94", "device", "6.5"), ("h5gds-write", "1.58", "write", "3.0"),
                               ("ceiling-odirect-write", "1.94", "write", "2.0"),
                               ("nvcomp-compress", "1.58", "device", "8.0"))]
    with open(src, "w", newline="") as fh:
        w = csv.DictWriter(fh, compressed.COLUMNS)
        w.writeheader()
        w.writerows(rows)
    assert compressed.main(["--plot", str(src)]) == 0
    summary = (tmp_path / "compressed-summary.md").read_text()
    assert "| field | lz4 | 1.94 | 1.58 | **3.00** |" in summary  # the write row: CPU and GPU ratios
    try:
        import matplotlib  # noqa: F401
        assert (tmp_path / "compressed.png").stat().st_size > 0
    except ImportError:
        assert "matplotlib not importable" in capsys.readouterr().out
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit) as done:
        compressed.main(["--plot", str(tmp_path / "other.csv")])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a compressed.csv" in err, err


def test_compressed_unknown_method_is_one_line(capsys):
    from h5gds.bench import compressed

    with pytest.raises(SystemExit) as done:
        compressed.main(["--methods", "h5gds-write,nvcomp-compres"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown method 'nvcomp-compres'" in err, err


def test_compressed_write_rows_with_host_arrays(tmp_path, monkeypatch, capsys):
    """bench_writes' rows without a GPU: host arrays stand in for CuPy's, and
    the route and encode statistics of a GPU-encoded write are made up (so
    the nvcomp-compress row is computed from them: decoded bytes / encode
    seconds). The write ceiling is measured for real, into a scratch file
    that is removed."""
    import types

    import numpy as np

    from h5gds.bench import compressed

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asarray=np.asarray, asnumpy=np.asarray))
    src = tmp_path / "src.h5"
    ratio = compressed.write_dataset(src, "field", "gzip-shuffle", 2 << 20)
    assert ratio is not None
    made_up = compressed.h5gds.EncodeStats(chunks=2, decoded_bytes=2 << 20, stored_bytes=1 << 20, encode_s=0.001,
                                           store_wait_s=0.002, total_s=0.004)
    monkeypatch.setattr(compressed, "last_encode_stats", lambda: made_up)
    monkeypatch.setattr(compressed.h5gds, "last_route", lambda: compressed.GPU_ENCODE_ROUTE)
    got = []

    def add(method, kind, fname, ratio_, cache, gbps, rep):
        got.append((method, kind, fname, cache, gbps, rep))

    methods = set(compressed.WRITE_METHODS)
    if not _odirect_works(tmp_path):  # the ceiling is O_DIRECT's alone: not measured here
        methods.discard("ceiling-odirect-write")
    compressed.bench_writes(src, "field", "gzip-shuffle", ratio, 0, methods, add)
    by_method = {g[0]: g for g in got}
    assert set(by_method) == methods
    if "ceiling-odirect-write" in methods:
        assert by_method["ceiling-odirect-write"][3] == "write" and by_method["ceiling-odirect-write"][4] > 0
    assert by_method["h5gds-write"][3] == by_method["h5py-write"][3] == "write"
    assert by_method["nvcomp-compress"][3] == "device"
    assert by_method["nvcomp-compress"][4] == pytest.approx((2 << 20) / 0.001 / 1e9)
    assert "encode 0.001 s, waiting for writes 0.002 s, total 0.004 s" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.h5"]  # the scratch and written files removed
    # nvcomp-compress alone still runs the h5gds write it is read from, without the write's row
    got.clear()
    compressed.bench_writes(src, "field", "gzip-shuffle", ratio, 1, {"nvcomp-compress"}, add)
    assert [g[0] for g in got] == ["nvcomp-compress"]


def test_compressed_loader_summary_ratios(tmp_path, capsys):
    """The loader part's summary: medians over repeats, h5gds / DataLoader
    cold and warm, h5gds / (O_DIRECT x ratio), the training epoch beside
    compute alone; one row per file, window and variant; and --plot of a
    compressed-loader.csv writes it too."""
    import csv

    from h5gds.bench import compressed, compressed_loader
    base = dict(bench="compressed-loader", data="field", filter="zstd", ratio="2.00", sample_bytes="65536",
                chunk_bytes="2097152", epoch_fraction="1.000", decode_seconds="")

    def row(method, cache, gbps, rep, window="", variant="", seconds="1.0"):
        return dict(base, method=method, cache=cache, GBps=str(gbps), repeat=str(rep), seconds=seconds,
                    window_bytes=window, variant=variant)
    rows = []
    for rep, (a, b) in enumerate([(2.0, 0.1), (3.0, 0.3), (4.0, 0.2)]):  # medians 3.0 and 0.2
        rows += [row("h5gds-loader", "cold", a, rep, "8388608", "default"),
                 row("h5gds-loader", "warm", 2 * a, rep, "8388608", "default"),
                 row("h5gds-loader", "cold", 10 * a, rep, "8388608", "X=1"),
                 row("torch-dataloader-h5py", "cold", b, rep), row("torch-dataloader-h5py", "warm", b, rep),
                 row("ceiling-odirect", "cold", 1.5, rep),
                 row("h5gds-loader-train", "cold", 1, rep, "8388608", "default", seconds="0.500"),
                 row("compute-only", "device", 1, rep, seconds="0.250")]
    path = compressed_loader.write_summary(rows, tmp_path / "s.md")
    lines = path.read_text().splitlines()
    body = [line for line in lines if line.startswith("| field")]
    assert len(body) == 2, body
    cells = [c.strip().replace("**", "") for c in body[0].strip("|").split("|")]
    assert cells[5:15] == ["default", "3.00", "0.200", "15.0x", "3.00", "1.00", "6.00", "0.200", "30.0x",
                           "0.500 / 0.250"], cells
    assert "30.00" in body[1] and "150.0x" in body[1] and "X=1" in body[1]
    src = tmp_path / "compressed-loader.csv"
    with open(src, "w", newline="") as fh:
        w = csv.DictWriter(fh, compressed_loader.COLUMNS)
        w.writeheader()
        w.writerows(rows)
    assert compressed.main(["--plot", str(src)]) == 0
    assert (tmp_path / "compressed-loader-summary.md").read_text() == path.read_text()
