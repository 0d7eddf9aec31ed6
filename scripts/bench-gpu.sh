#!/usr/bin/env bash
# The benchmark on a GPU machine, in parts that each fit one device call:
#   main   GDS vs the paper's SEC2 and SEC2+PINNED, with the ceilings, and the
#          peers (h5py+cupy, kvikio at 1/8/16 threads), 256 MiB, 1 GiB, 4 GiB:
#          main.csv, peers.csv, all.csv, summary.md, all-rate-vs-size.png
#   paper  the other methods (DIRECT, DIRECT+PINNED, GDS-staged, GDS-cufile,
#          GDS-posix) with cuFile made usable (udev entry, test set-up only)
#   sweep  threads x block size for GDS (paper Fig. 5-6): sweep.csv, heat map
#   host   host memory, SEC2 vs DIRECT vs GDS: host.csv
#   chunked  GDS vs SEC2 on chunked datasets (chunk cache off: HDF5 hands the
#          driver all chunks of an H5Dread/H5Dwrite as one vector on 1.14),
#          1 MiB and 16 MiB chunks: chunked-1MiB.csv, chunked-16MiB.csv
#   calls  per-call cost of small host requests, sec2 vs gds, without and with a
#          CUDA context in the process: calls.csv, calls-cuda.csv
#   autotune  the autotuning grid (h5gds-bench --tune) and GDS at threads x block
#          (auto included) for durable write and cold read at 1 GiB and 4 GiB, in one
#          run: autotune.csv, tune.txt
#   engine the engine under concurrent callers (two files read by one thread
#          vs two threads, warm and cold) and a read ordered "none" during a
#          20 ms kernel on the legacy stream: engine.csv
# Run after a build in build/gpu-h14 (scripts/gpu-check.sh does it):
#   bash scripts/bench-gpu.sh main|paper|sweep|host [SIZES]
# Results go to $OUT (or build/gpu-out). Every command line is logged in commands.txt.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
part=${1:-main}
sizes=${2:-256MiB,1GiB,4GiB}
bin=build/gpu-h14/tools/h5gds-bench
[ -x "$bin" ] || { echo "bench-gpu: build first (scripts/gpu-check.sh)"; exit 1; }
export LD_LIBRARY_PATH="$root/build/deps/hdf5-1.14.5/lib:${LD_LIBRARY_PATH:-}"
status=0
run() { echo "+ $*" | tee -a "$out/commands.txt"; "$@" || status=1; }
plot() { python3 tools/plot_bench.py "$@" || echo "plot failed (matplotlib?)"; }

case $part in
main)
  # kvikio and its helpers travel as wheels (.whl, carried); cupy and h5py are on the machine.
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site
  fi
  export KVIKIO_COMPAT_MODE=ON PYTHONUNBUFFERED=1
  run "$bin" --sizes "$sizes" --repeat 3 --methods GDS,SEC2,SEC2+PINNED --csv "$out/main.csv"
  run python3 tools/bench_peers.py --sizes "$sizes" --repeat 3 --kvikio-threads 1,8,16 --csv "$out/peers.csv"
  { cat "$out/main.csv"; tail -n +2 "$out/peers.csv"; } > "$out/all.csv"
  plot "$out/all.csv" --summary "$out/summary.md"
  ;;
paper)
  udev_entry="/run/udev/data/b$(stat -c '%Hd:%Ld' /)"
  mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' > "$udev_entry"
  run "$bin" --sizes "$sizes" --repeat 3 --methods GDS,GDS-staged,GDS-cufile,GDS-posix,DIRECT,DIRECT+PINNED \
      --csv "$out/paper.csv"
  rm -f "$udev_entry"
  plot "$out/paper.csv" --no-figures --summary "$out/paper.md"
  ;;
sweep)
  run "$bin" --sizes "$sizes" --repeat 1 --methods GDS --no-ceilings --threads 1,2,4,8,16 --blocks 1MiB,4MiB,16MiB,32MiB \
      --csv "$out/sweep.csv"
  plot "$out/sweep.csv"
  ;;
host)
  run "$bin" --memory host --sizes "$sizes" --repeat 3 --methods SEC2,DIRECT,GDS --csv "$out/host.csv"
  plot "$out/host.csv" --no-figures
  ;;
chunked)
  for chunk in 1MiB 16MiB; do
    run "$bin" --sizes "$sizes" --repeat 3 --methods GDS,SEC2 --chunk $chunk --csv "$out/chunked-$chunk.csv"
  done
  ;;
calls)
  calls=build/gpu-h14/tools/h5gds-calls
  csizes=${2:-4KiB,64KiB,256KiB,1MiB,4MiB}
  run "$calls" --sizes "$csizes" --rounds 9 --calls 2000 --dir "$root/build" --csv "$out/calls.csv"
  run "$calls" --sizes "$csizes" --rounds 9 --calls 2000 --dir "$root/build" --cuda --csv "$out/calls-cuda.csv"
  ;;
autotune)
  rm -rf "$HOME/.cache/h5gds"  # measure afresh, as a new user's first run does
  run "$bin" --tune --dir "$root/build" > "$out/tune.txt" 2>&1; cat "$out/tune.txt"
  run "$bin" --sizes "${2:-1GiB,4GiB}" --repeat 3 --methods GDS --phases write,cold_read \
      --threads auto,8,16 --blocks auto,16MiB,32MiB --csv "$out/autotune.csv"
  run python3 tools/autotune_summary.py "$out/autotune.csv" --tuned "$out/tune.txt" | tee "$out/autotune-summary.md"
  ;;
engine)
  run build/gpu-h14/tools/h5gds-engine-bench --dir "$root/build" --size "${2:-2GiB}" --overlap-size 1GiB \
      --repeat 3 --kernel-ms 20 --csv "$out/engine.csv"
  ;;
*) echo "bench-gpu: unknown part '$part' (main, paper, sweep, host, chunked, calls, autotune, engine)"; exit 2 ;;
esac
exit $status
