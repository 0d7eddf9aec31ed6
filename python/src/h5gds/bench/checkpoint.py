"""Checkpoint benchmark: how long a GPU program stalls, and when its state
is durable, saving a PyTorch state, beside the floors and the peers.

  python -m h5gds.bench checkpoint,train-loop [--dir DIR] [--out OUT] [--repeat 3]

checkpoint: the state of the round-2 anchors (96 x 4096x4096 fp16, 32 x 1M
   fp32, 64 x 4096 fp32 = 3.13 GiB; and the same with bf16 in place of
   fp16; `--states 16g`: 512 layers, 16.1 GiB, where memory allows: a
   method that runs out of memory gets a row with NaN and the reason in
   `note`), methods in one run, interleaved by repeat:
     floor-d2h       copy of every tensor into preallocated pinned host memory
     floor-d2d       clone of every tensor on the device
     h5gds-async     h5gds.save(async_=True): stall = until save returns (the
                     state may change from then on), durable = until wait()
                     returns; once with device snapshots, once with pinned host
                     snapshots (column `memory`)
     h5gds-sync      h5gds.save(async_=False)
     torch.save      torch.save + fsync
     safetensors     safetensors.torch.save_file + fsync
     h5py            one dataset per tensor (tensor.cpu().numpy()) + fsync
     dcp.save        torch.distributed.checkpoint.save (1 rank, gloo)
     dcp.async_save  its async_save: stall = until the call returns (it stages
                     to host memory inside the call), durable = its future
   Each measurement starts in an empty directory (the previous files deleted
   and synced outside the clock, as h5gds-bench does).
   Columns: bench,method,state,memory,phase,prepared,bytes,repeat,stall_s,
   durable_s,peak_host_bytes,peak_device_bytes,note (h5gds rows: background
   writes in flight and workers busy at most, stream-ordered snapshots,
   bytes reserved; host: growth of the resident set, sampled
   every 5 ms; device: torch's peak allocation above the state, or the
   snapshot memory h5gds reports). phase: `first` for an h5gds save that
   allocated its snapshot memory (a process's first save of that kind) and
   for another method's first run in the process, `steady` otherwise;
   the summary keeps them apart.
first-save (with h5gds-async, bench = first-save): a process's first save
   apart, each in a fresh process (python -m h5gds.bench.checkpoint): the
   state made, then two saves (phase first, then steady), device and pinned
   host snapshots, prepared: `no`; `memory` (the snapshot memory alone:
   h5gds.prepare_checkpoint(state, background=False)); `ahead` (memory and
   engine: prepare_checkpoint(state, path=..., background=False)); its time
   in note); `background` (prepare_checkpoint(state, path=...) in the
   background, then about 2 s of GPU compute before the first save).
train-loop: N steps of a fixed GPU compute (matrix products, about 30 ms),
   a checkpoint every k steps (k steps of compute: longer than one drain),
   the state changing every step; mean step time without checkpoints, with
   h5gds async (device snapshots), dcp.async_save and torch.save (bench =
   train-loop, column step_ms). A checkpoint waits for the previous one.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import h5gds

FIELDS = ["bench", "method", "state", "memory", "phase", "prepared", "bytes", "repeat", "stall_s", "durable_s",
          "peak_host_bytes", "peak_device_bytes", "step_ms", "steps", "every", "note"]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _PeakRss:
    """The resident set's growth over a block, sampled every 5 ms."""

    def __enter__(self) -> "_PeakRss":
        self.base = self.peak = _rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.base)


NOTES: dict[str, str] = {}

# name -> (layers of 4096x4096 in the half type); embeddings and norms as in the anchors
STATES = {"fp16": ("fp16-3.13GiB", "float16", 96), "bf16": ("bf16-3.13GiB", "bfloat16", 96),
          "16g": ("fp16-16.1GiB", "float16", 512)}


def make_state(torch: Any, half: Any, layers: int = 96) -> dict[str, Any]:
    g = torch.Generator(device="cuda").manual_seed(0)
    state: dict[str, Any] = {}
    for i in range(layers):
        state[f"layers.{i}.weight"] = torch.randn(4096, 4096, device="cuda", generator=g).to(half)
    for i in range(32):
        state[f"embed.{i}"] = torch.randn(1 << 20, device="cuda", generator=g)
    for i in range(64):
        state[f"norm.{i}"] = torch.randn(4096, device="cuda", generator=g)
    torch.cuda.synchronize()
    return state


def _fsync_tree(path: Path) -> None:
    paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _clear(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def checkpoint_methods(torch: Any, state: dict[str, Any], d: Path) -> list[tuple[str, str, Callable[[], tuple[float, float, int]]]]:
    """(method, memory, fn -> (stall_s, durable_s, reported device bytes))."""
    pinned = {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=True) for k, v in state.items()}

    def floor_d2h() -> tuple[float, float, int]:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for k, v in state.items():
            pinned[k].copy_(v, non_blocking=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, float("nan"), 0

    def floor_d2d() -> tuple[float, float, int]:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        clones = {k: v.clone() for k, v in state.items()}
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        del clones
        return dt, float("nan"), 0

    def h5gds_save(async_: bool, memory: str) -> Callable[[], tuple[float, float, int]]:
        def run() -> tuple[float, float, int]:
            path = d / "h5gds.h5"
            allocated = h5gds.checkpoint_memory_info()["files_allocated"]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            h = h5gds.save(state, path, async_=async_, memory=memory)
            stall = time.perf_counter() - t0
            h.wait()
            durable = time.perf_counter() - t0
            # the save allocated its snapshot memory: a first save (phase)
            NOTES["allocated"] = "yes" if h5gds.checkpoint_memory_info()["files_allocated"] > allocated else "no"
            # how the drain went (column note)
            NOTES["last"] = (f"background writes at once {h.peak_background_writes}; busy workers at most "
                             f"{h.peak_busy_workers}; stream-ordered snapshots {h.stream_ordered_snapshots}; "
                             f"reserved {h.reserved_bytes}; stall ms: "
                             + " ".join(f"{k} {v * 1e3:.1f}" for k, v in h.timings.items() if k != "metadata")
                             + f"; background metadata ms {h.timings.get('metadata', 0.0) * 1e3:.1f}")
            return stall, durable, h.snapshot_memory_bytes if memory != "host" else 0
        return run

    def torch_save() -> tuple[float, float, int]:
        path = d / "torch.pt"
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.save(state, path)
        _fsync_tree(path)
        dt = time.perf_counter() - t0
        return dt, dt, 0

    methods: list[tuple[str, str, Callable[[], tuple[float, float, int]]]] = [
        ("floor-d2h", "host", floor_d2h), ("floor-d2d", "device", floor_d2d),
        ("h5gds-async", "device", h5gds_save(True, "device")), ("h5gds-async", "host", h5gds_save(True, "host")),
        ("h5gds-sync", "-", h5gds_save(False, "auto")), ("torch.save", "-", torch_save),
    ]
    try:
        from safetensors.torch import save_file

        def safetensors_save() -> tuple[float, float, int]:
            path = d / "model.safetensors"
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            save_file(state, str(path))
            _fsync_tree(path)
            dt = time.perf_counter() - t0
            return dt, dt, 0
        methods.append(("safetensors", "-", safetensors_save))
    except ImportError:
        pass

    import h5py

    def h5py_save() -> tuple[float, float, int]:
        path = d / "h5py.h5"
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with h5py.File(path, "w") as f:
            for k, v in state.items():
                host = v.cpu()
                f.create_dataset(k, data=(host.view(torch.int16) if v.dtype == torch.bfloat16 else host).numpy())
        _fsync_tree(path)
        dt = time.perf_counter() - t0
        return dt, dt, 0
    methods.append(("h5py", "-", h5py_save))

    try:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        if not dist.is_initialized():
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29517")
            dist.init_process_group("gloo", rank=0, world_size=1)

        def dcp_save() -> tuple[float, float, int]:
            path = d / "dcp"
            _clear(path)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dcp.save(state, checkpoint_id=str(path))
            _fsync_tree(path)
            dt = time.perf_counter() - t0
            return dt, dt, 0

        def dcp_async() -> tuple[float, float, int]:
            path = d / "dcp-async"
            _clear(path)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fut = dcp.async_save(state, checkpoint_id=str(path))
            stall = time.perf_counter() - t0
            fut.result()
            _fsync_tree(path)
            return stall, time.perf_counter() - t0, 0
        methods += [("dcp.save", "-", dcp_save), ("dcp.async_save", "-", dcp_async)]
    except Exception as exc:  # noqa: BLE001 - reported in the CSV
        print(f"dcp unavailable: {exc}")
    return methods


def bench_checkpoint(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    import torch
    d = Path(args.dir) / "ckpt"
    d.mkdir(parents=True, exist_ok=True)
    keys = [k for k in args.states.split(",") if k in STATES]
    for key in keys:
        state_name, half_name, layers = STATES[key]
        if not args.methods or "h5gds-async" in args.methods:
            for rep in range(args.repeat):
                first_save_rows(key, d, rep, rows)
        state = make_state(torch, getattr(torch, half_name), layers)
        nbytes = sum(v.numel() * v.element_size() for v in state.values())
        methods = checkpoint_methods(torch, state, d)
        if args.methods:  # e.g. "h5gds-async,floor-d2d": just those
            methods = [m for m in methods if m[0] in args.methods]
        for rep in range(args.repeat):
            for method, memory, fn in methods:
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                NOTES.pop("last", None)
                NOTES.pop("allocated", None)
                note = ""
                # Every method writes into an empty directory, its previous
                # files deleted and their blocks freed before the clock starts
                # (as the C bench does; ext4 frees a GiB's blocks in a good
                # part of a second, which a save over the previous file would
                # otherwise pay and one into a fresh name would not).
                for old in d.iterdir():
                    _clear(old)
                os.sync()
                with _PeakRss() as rss:
                    try:
                        stall, durable, dev_bytes = fn()
                    except (RuntimeError, MemoryError, OSError) as exc:  # the large state: where memory allows
                        if layers == 96:
                            raise
                        stall = durable = float("nan")
                        dev_bytes = 0
                        note = f"failed: {str(exc).splitlines()[0][:200]}"
                        torch.cuda.empty_cache()
                peak_dev = max(dev_bytes, torch.cuda.max_memory_allocated() - base)
                allocated = NOTES.get("allocated")  # h5gds: whether the save allocated its snapshot memory
                phase = "first" if (allocated == "yes" if allocated else rep == 0) else "steady"
                r = dict(bench="checkpoint", method=method, state=state_name, memory=memory, phase=phase,
                         prepared="no" if allocated else "-", bytes=nbytes, repeat=rep, stall_s=f"{stall:.4f}", durable_s=f"{durable:.4f}", peak_host_bytes=rss.growth,
                         peak_device_bytes=peak_dev, note=note or NOTES.get("last", ""))
                rows.append(r)
                print(f"checkpoint {state_name:13s} {method:15s} {memory:6s} {phase:6s} stall {stall:7.3f} s  durable "
                      f"{durable:7.3f} s  host +{rss.growth / 2**30:5.2f} GiB  device +{peak_dev / 2**30:5.2f} GiB",
                      flush=True)
        if args.verify:  # an asynchronous save (device snapshots) read back
            for old in d.iterdir():
                _clear(old)
            h5gds.save(state, d / "h5gds.h5", memory="device").wait()
            back = h5gds.load(d / "h5gds.h5", device="cuda")
            bad = [k for k in state if not torch.equal(back[k], state[k])]
            print(f"verify {state_name}: {'OK' if not bad else f'{len(bad)} tensors differ'}")
            rows.append(dict(bench="checkpoint", method="verify", state=state_name, note="ok" if not bad else
                             f"{len(bad)} differ"))
            del back
        del state, methods
        torch.cuda.empty_cache()
    shutil.rmtree(d, ignore_errors=True)


FIRST_SAVE_KINDS = tuple((memory, prepared) for memory in ("device", "host")
                         for prepared in ("no", "memory", "ahead", "background"))


def first_save_rows(key: str, d: Path, rep: int, rows: list[dict[str, Any]]) -> None:
    """A process's first save and the one after it, each kind in a fresh
    process (this module run as a program): rows of bench first-save."""
    state_name = STATES[key][0]
    for memory, prepared in FIRST_SAVE_KINDS:
        spec = json.dumps({"state": key, "memory": memory, "prepared": prepared, "dir": str(d / "first")})
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "h5gds.bench.checkpoint", "--first-save", spec],
                              capture_output=True, text=True, timeout=900, check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            why = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            rows.append(dict(bench="first-save", method="h5gds-async", state=state_name, memory=memory, phase="first",
                             prepared=prepared, repeat=rep, stall_s="nan", durable_s="nan",
                             note=f"failed (exit {proc.returncode}): {why}"))
            print(f"first-save {state_name} {memory} prepared={prepared}: failed: {why}", flush=True)
            continue
        res = json.loads(lines[-1])
        for phase in ("first", "steady"):
            m = res[phase]
            note = ("stall ms: " + " ".join(f"{k} {v * 1e3:.1f}" for k, v in m["timings"].items() if k != "metadata")
                    + f"; memory ready {m['ready']}")
            if phase == "first" and prepared != "no":
                note += f"; prepare_checkpoint call {res['prepare_call_s'] * 1e3:.1f} ms, ready after " \
                        f"{res['prepare_ready_s'] * 1e3:.1f} ms"
            rows.append(dict(bench="first-save", method="h5gds-async", state=state_name, memory=memory, phase=phase,
                             prepared=prepared if phase == "first" else "-", bytes=res["bytes"], repeat=rep,
                             stall_s=f"{m['stall_s']:.4f}", durable_s=f"{m['durable_s']:.4f}",
                             peak_device_bytes=m["snapshot_memory_bytes"] if memory == "device" else 0, note=note))
        print(f"first-save {state_name} {memory:6s} prepared={prepared:10s} "
              f"first stall {res['first']['stall_s']:7.3f} s "
              f"(memory ready: {res['first']['ready']}), steady {res['steady']['stall_s']:7.3f} s  "
              f"[{time.perf_counter() - t0:.0f} s in all]", flush=True)
    shutil.rmtree(d / "first", ignore_errors=True)


def _first_save_child(spec: dict[str, Any]) -> None:
    """In a fresh process: make the state, maybe prepare its snapshot
    memory, then save twice (first, steady); one JSON line on stdout."""
    import torch
    _, half_name, layers = STATES[spec["state"]]
    d = Path(spec["dir"])
    d.mkdir(parents=True, exist_ok=True)
    state = make_state(torch, getattr(torch, half_name), layers)
    memory, prepared = spec["memory"], spec["prepared"]
    res: dict[str, Any] = {"bytes": sum(v.numel() * v.element_size() for v in state.values())}
    t0 = time.perf_counter()
    if prepared in ("memory", "ahead"):
        h5gds.prepare_checkpoint(state, memory=memory, background=False, path=d if prepared == "ahead" else None)
        res["prepare_call_s"] = res["prepare_ready_s"] = time.perf_counter() - t0
    elif prepared == "background":
        mem = h5gds.prepare_checkpoint(state, memory=memory, path=d)
        res["prepare_call_s"] = time.perf_counter() - t0
        # the training loop goes on meanwhile: about 2 s of matrix products
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < 2.0:
            for _ in range(10):
                a = torch.mm(a, a).clamp_(-1, 1)
            torch.cuda.synchronize()
        mem.wait()  # done long before: it returns at once
        res["prepare_ready_s"] = time.perf_counter() - t0
        del a
    for phase in ("first", "steady"):
        for old in d.iterdir():
            _clear(old)
        os.sync()
        before = h5gds.checkpoint_memory_info()
        torch.cuda.synchronize()
        t = time.perf_counter()
        h = h5gds.save(state, d / "h5gds.h5", memory=memory)
        stall = time.perf_counter() - t
        h.wait()
        durable = time.perf_counter() - t
        after = h5gds.checkpoint_memory_info()
        res[phase] = {"stall_s": stall, "durable_s": durable, "timings": h.timings,
                      "snapshot_memory_bytes": h.snapshot_memory_bytes,
                      "ready": "yes" if after["files_ready"] > before["files_ready"] else "no"}
    shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(res), flush=True)


def bench_train_loop(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    import torch
    d = Path(args.dir) / "loop"
    d.mkdir(parents=True, exist_ok=True)
    state = make_state(torch, torch.float16)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)

    def step() -> None:
        c = a
        for _ in range(args.step_matmuls):
            c = torch.mm(c, b)
        state["layers.0.weight"].add_(c[:4096, :4096], alpha=1e-6)  # the state changes every step

    steps, every = args.steps, args.every

    def loop(save: Callable[[int], Any] | None) -> float:
        """Mean step time; checkpoints after steps every, 2*every, ... (not
        after the last step: a loop's end is not a step, and what happens
        after it -- waiting for the last checkpoint -- is not step time)."""
        pending: list[Any] = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(1, steps + 1):
            step()
            if save is not None and i % every == 0 and i < steps:
                for p in pending:  # the previous checkpoint must be complete before the next
                    p()
                pending = [save(i)]
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) / steps * 1e3
        for p in pending:
            p()
        return ms

    def h5gds_async(i: int) -> Callable[[], None]:
        h = h5gds.save(state, d / "loop.h5", async_=True, memory="device")
        return h.wait

    def torch_save(i: int) -> Callable[[], None]:
        torch.save(state, d / "loop.pt")
        _fsync_tree(d / "loop.pt")
        return lambda: None

    methods: list[tuple[str, Callable[[int], Any] | None]] = [("no-checkpoint", None), ("h5gds-async", h5gds_async),
                                                             ("torch.save", torch_save)]
    try:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        if not dist.is_initialized():
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29517")
            dist.init_process_group("gloo", rank=0, world_size=1)

        def dcp_async(i: int) -> Callable[[], None]:
            path = d / f"dcp-{i}"
            fut = dcp.async_save(state, checkpoint_id=str(path))

            def durable() -> None:
                fut.result()
                _fsync_tree(path)
                shutil.rmtree(path, ignore_errors=True)
            return durable
        methods.append(("dcp.async_save", dcp_async))
    except Exception as exc:  # noqa: BLE001
        print(f"dcp unavailable: {exc}")
    loop(None)  # warm-up
    for rep in range(args.loop_repeat):
        for name, save in methods:
            ms = loop(save)
            rows.append(dict(bench="train-loop", method=name, state="fp16-3.13GiB", repeat=rep, step_ms=f"{ms:.3f}",
                             steps=steps, every=every))
            print(f"train-loop {name:15s} {ms:8.2f} ms/step ({steps} steps, checkpoint every {every})", flush=True)
    shutil.rmtree(d, ignore_errors=True)


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown rows, medians per state, method, memory, phase and
    preparation: a process's first saves apart from the steady state."""
    out = []
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("bench") in ("checkpoint", "first-save", "train-loop") and r.get("method") != "verify":
            key = (r["bench"], r.get("state", ""), r["method"], r.get("memory", ""), r.get("phase", ""),
                   r.get("prepared", ""))
            groups.setdefault(key, []).append(r)
    for (bench, state, method, memory, phase, prepared), rs in groups.items():
        if bench == "train-loop":
            ms = statistics.median(float(r["step_ms"]) for r in rs)
            out.append(f"| train-loop | {method} | | | | {ms:.2f} ms/step | |")
            continue
        stall = statistics.median(float(r["stall_s"]) for r in rs)
        durable = statistics.median(float(r["durable_s"]) for r in rs)
        where = " (fresh process)" if bench == "first-save" else ""
        out.append(f"| {state} | {method}{where} | {memory} | {phase} | {prepared} | {stall:.3f} | {durable:.3f} |")
    return out


def run(parts: list[str], args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = []
    if "checkpoint" in parts:
        bench_checkpoint(args, rows)
    if "train-loop" in parts:
        bench_train_loop(args, rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "checkpoint.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS})
    (out / "checkpoint-summary.md").write_text(
        "| state | method | memory | phase | prepared | stall (s) | durable (s) |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(summary(rows)) + "\n")
    try:
        _plot(rows, out / "checkpoint.png")
    except ImportError:
        pass


def _plot(rows: list[dict[str, Any]], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cp = [r for r in rows if r.get("bench") == "checkpoint" and r.get("method") != "verify"
          and r.get("state") == "fp16-3.13GiB"]
    if any(r.get("phase") == "steady" for r in cp):  # the steady state (first saves: the summary)
        cp = [r for r in cp if r.get("phase") == "steady"]
    if not cp:
        return
    names: list[str] = []
    for r in cp:
        n = r["method"] + (f" ({r['memory']})" if r["memory"] not in ("-", "") else "")
        if n not in names:
            names.append(n)

    def med(n: str, key: str) -> float:
        vals = [float(r[key]) for r in cp if r["method"] + (f" ({r['memory']})" if r["memory"] not in ("-", "") else "") == n]
        vals = [v for v in vals if v == v]
        return statistics.median(vals) if vals else 0.0
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], [med(n, "stall_s") for n in names], width=0.4, label="loop stalled (s)")
    ax.bar([i + 0.2 for i in x], [med(n, "durable_s") for n in names], width=0.4, label="durable after (s)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_title("Checkpoint of a 3.13 GiB PyTorch state (fp16), median of the steady state")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":  # the fresh process of first_save_rows
    if len(sys.argv) != 3 or sys.argv[1] != "--first-save":
        raise SystemExit("usage: python -m h5gds.bench.checkpoint --first-save JSON (run by python -m h5gds.bench "
                         "checkpoint)")
    _first_save_child(json.loads(sys.argv[2]))
