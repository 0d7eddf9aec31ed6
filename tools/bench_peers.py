#!/usr/bin/env python3
"""Peers of h5gds-bench, measured the same way and written in the same CSV
format: h5py + cupy (what Python users do today) and kvikio (raw files, at
each thread count given; the best one is what the README compares with).

Phases: write (durable: write, close, fsync), cold_read (page cache dropped),
warm_read (the same read again). Rates are bytes / wall-clock. Every read is
verified against the data written.

    python3 tools/bench_peers.py --sizes 256MiB,1GiB --csv peers.csv [--append]
"""
import argparse
import csv
import os
import platform
import sys
import tempfile
import time

from cli_common import ArgumentParser, fail, int_arg, int_list_arg, size_list_arg

PROG = "bench_peers"
PEERS = ("h5py+cupy", "kvikio")


def drop_cache(path):
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        return "fadvise"


def remove_untimed(path):
    """A durable write creates a new file; deleting the old one is not timed (as in h5gds-bench)."""
    if os.path.exists(path):
        os.unlink(path)
    os.sync()


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def main(argv=None):
    ap = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256MiB", type=size_list_arg,
                    help="sizes as in the gds configuration: 4096, 64KiB, 8MiB, 1GiB, 1G, 500MB")
    ap.add_argument("--repeat", type=int_arg(1), default=3)
    ap.add_argument("--kvikio-threads", default="1,8,16", type=int_list_arg(1))
    ap.add_argument("--peers", default="h5py+cupy,kvikio", help=f"a comma list of {', '.join(PEERS)}")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--append", action="store_true", help="append rows (no header) to an existing CSV")
    args = ap.parse_args(argv)
    peers = args.peers.split(",")
    for p in peers:
        if p not in PEERS:
            ap.error(f"argument --peers: unknown peer {p!r} ({', '.join(PEERS)})")
    if args.dir is not None and not os.path.isdir(args.dir):
        ap.error(f"argument --dir: {args.dir!r} is not a directory")

    try:
        import cupy as cp  # (imported late: --help and argument errors work without a GPU)
        gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as exc:  # noqa: BLE001 - no CuPy, no driver, no device: one line
        fail(PROG, f"needs CuPy and a CUDA GPU ({' '.join(str(exc).split()) or type(exc).__name__})", status=1)

    mode = "a" if args.append else "w"
    try:
        out = open(args.csv, mode, newline="")
    except OSError as exc:
        ap.error(f"argument --csv: cannot open {args.csv!r}: {exc.strerror}")
    workdir = tempfile.mkdtemp(prefix="h5gds-peers.", dir=args.dir)
    path = os.path.join(workdir, "peer.bin")
    fs = "unknown"
    machine = dict(gpu=gpu, cpus=os.cpu_count(), kernel=platform.release())
    w = csv.writer(out)
    if not args.append:
        w.writerow("method,phase,memory,size_bytes,threads,block_bytes,repeat,seconds,rate_GBps,gpu,cpus,"
                   "filesystem,kernel,hdf5_version,driver_config,cold_cache,filter,ratio".split(","))
    cold = "none"

    def row(method, phase, size, threads, block, rep, seconds, hdf5="", config=""):
        w.writerow([method, phase, "device", size, threads, block, rep, f"{seconds:.6f}",
                    f"{size / seconds / 1e9:.4f}", machine["gpu"], machine["cpus"], fs, machine["kernel"],
                    hdf5, config, cold, "none", ""])  # raw data: no filter, no ratio
        out.flush()
        print(f"  {method:12s} {phase:10s} {size / (1 << 20):9.2f} MiB  threads {threads:3d}  "
              f"{size / seconds / 1e9:7.2f} GB/s", flush=True)

    try:
        for size in args.sizes:
            src = cp.random.randint(0, 256, size=size, dtype=cp.uint8)
            dst = cp.empty_like(src)
            cp.cuda.runtime.deviceSynchronize()
            if "h5py+cupy" in peers:
                import h5py
                for rep in range(args.repeat):
                    remove_untimed(path)
                    t0 = time.perf_counter()
                    host = cp.asnumpy(src)
                    with h5py.File(path, "w") as f:
                        f.create_dataset("data", data=host)
                    fsync_path(path)
                    row("h5py+cupy", "write", size, 1, 0, rep, time.perf_counter() - t0, h5py.version.hdf5_version)
                    for phase in ("cold_read", "warm_read"):
                        dst.fill(0x5A)
                        cp.cuda.runtime.deviceSynchronize()
                        if phase == "cold_read":
                            cold = drop_cache(path)
                        t0 = time.perf_counter()
                        with h5py.File(path, "r") as f:
                            host = f["data"][...]
                        dst.set(host)
                        cp.cuda.runtime.deviceSynchronize()
                        t = time.perf_counter() - t0
                        if not bool(cp.array_equal(src, dst)):
                            sys.exit(f"h5py+cupy: verification failed ({phase}, {size} bytes)")
                        row("h5py+cupy", phase, size, 1, 0, rep, t, h5py.version.hdf5_version)
            if "kvikio" in peers:
                import kvikio
                import kvikio.defaults
                for threads in args.kvikio_threads:
                    kvikio.defaults.set({"num_threads": threads, "task_size": 16 << 20})
                    cfg = f"threads={threads},task_size=16MiB,compat_mode={kvikio.defaults.get('compat_mode')}"
                    for rep in range(args.repeat):
                        remove_untimed(path)
                        t0 = time.perf_counter()
                        with kvikio.CuFile(path, "w") as f:
                            n = f.write(src)
                        fsync_path(path)
                        t = time.perf_counter() - t0
                        if n != size:
                            sys.exit(f"kvikio: short write {n} of {size}")
                        row("kvikio", "write", size, threads, 16 << 20, rep, t, config=cfg)
                        for phase in ("cold_read", "warm_read"):
                            dst.fill(0x5A)
                            cp.cuda.runtime.deviceSynchronize()
                            if phase == "cold_read":
                                cold = drop_cache(path)
                            t0 = time.perf_counter()
                            with kvikio.CuFile(path, "r") as f:
                                n = f.read(dst)
                            cp.cuda.runtime.deviceSynchronize()
                            t = time.perf_counter() - t0
                            if n != size or not bool(cp.array_equal(src, dst)):
                                sys.exit(f"kvikio: verification failed ({phase}, {size} bytes)")
                            row("kvikio", phase, size, threads, 16 << 20, rep, t, config=cfg)
            del src, dst
            cp.get_default_memory_pool().free_all_blocks()
    finally:
        out.close()
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)


if __name__ == "__main__":
    main()
