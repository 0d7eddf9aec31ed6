#!/usr/bin/env bash
# The full benchmark on a GPU machine: h5gds-bench (ceilings, the paper's
# methods, h5gds's paths) and the peers (h5py+cupy, kvikio) into one CSV,
# plus figures. Called by scripts/gpu-check.sh --bench, or on its own after a
# build in build/gpu-h14:   bash scripts/bench-gpu.sh [--sizes LIST] [more h5gds-bench args]
# Results go to $OUT (or build/gpu-out): bench.csv, peers.csv, all.csv, *.png, bench.txt.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
bin=build/gpu-h14/tools/h5gds-bench
[ -x "$bin" ] || { echo "bench-gpu: build first (scripts/gpu-check.sh)"; exit 1; }
sizes=256MiB,1GiB,4GiB
if [ "${1:-}" = "--sizes" ]; then sizes=$2; shift 2; fi
export LD_LIBRARY_PATH="$root/build/deps/hdf5-1.14.5/lib:${LD_LIBRARY_PATH:-}"
# kvikio and its helpers travel as wheels (.whl, carried); everything else is on the machine.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export KVIKIO_COMPAT_MODE=${KVIKIO_COMPAT_MODE:-ON}
echo "command: $bin --sizes $sizes --repeat 3 --csv $out/bench.csv $*" | tee "$out/command.txt"
"$bin" --sizes "$sizes" --repeat 3 --csv "$out/bench.csv" "$@" | tee "$out/bench.txt"
rc=${PIPESTATUS[0]}
echo "command: python3 tools/bench_peers.py --sizes $sizes --repeat 3 --csv $out/peers.csv" | tee -a "$out/command.txt"
PYTHONUNBUFFERED=1 python3 tools/bench_peers.py --sizes "$sizes" --repeat 3 --csv "$out/peers.csv" | tee "$out/peers.txt"
rc2=${PIPESTATUS[0]}
{ cat "$out/bench.csv"; tail -n +2 "$out/peers.csv"; } > "$out/all.csv"
python3 tools/plot_bench.py "$out/all.csv" --summary "$out/summary.md" || true
exit $(( rc || rc2 ))
