#!/usr/bin/env bash
# The Python package on the GPU machine (no network): builds and installs it
# into the machine's Python (3.12 with torch, cupy, h5py 3.16, numpy, pytest),
# runs its tests with the GPU ones, then the benchmarks into $OUT.
#   device tool, carry: build/deps/hdf5-1.14.5 (headers), .whl-py (build backend wheels)
#   bash scripts/gpu-python-check.sh [PARTS]     # PARTS: whole,loader,loader-train,loader-ab (default) or "none"
# whole also builds the C h5gds-bench (build/gpu-h14) and runs its GDS figures in the same run
# (rows c-h5gds-bench-gds; $OUT/whole); loader and loader-train: medians of 3 repeats
# (LOADER_REPEAT), 256 MiB read per measurement (LOADER_READ) ($OUT/loader); loader-ab: h5gds-loader
# alone with the previous settings, for comparison on the same files: threads=16 ($OUT/loader-t16)
# and without the read-ahead of uncached samples ($OUT/loader-nolookahead).
# About 6 minutes in all on the H100 (split into two calls, whole and the rest, if needed).
#   H5GDS_BENCH_ARGS="--states fp16,16g --repeat 3 --verify" bash scripts/gpu-python-check.sh checkpoint,train-loop
#     (extra options for python -m h5gds.bench, for the parts other than whole and loader*)
# .whl-py/ holds, downloaded beforehand with network:
#   pip download -d .whl-py --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 scikit-build-core pathspec packaging
#   (scikit-build-core's own dependencies on 3.12 are packaging and pathspec; kvikio's wheels are optional,
#    copied from /work/shared/wheels: kvikio_cu13, libkvikio_cu13, rapids_logger)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
exec > >(tee -a "$out/gpu-python-check.log") 2>&1
parts=${1:-whole,loader,loader-train,loader-ab}
status=0
py=${PYTHON:-python3}
step() { printf '\n== %s\n' "$*"; }

step "machine"
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
$py -c "import sys, h5py, numpy; print(sys.version); print('h5py', h5py.__version__, 'HDF5', h5py.version.hdf5_version)"
$py -c "import cupy; print('cupy', cupy.__version__)" || true
$py -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" || true

# H5GDS_PY_BENCH_ONLY=1: the package is installed already (an earlier call of
# this script in the same machine session): benchmarks only.
if [ "${H5GDS_PY_BENCH_ONLY:-0}" != 1 ]; then
step "build backend and optional wheels from .whl-py (no network)"
$py -m pip install -q --no-index --find-links .whl-py scikit-build-core pathspec packaging || { echo "scikit-build-core missing from .whl-py"; exit 1; }
$py -m pip install -q --no-index --no-deps .whl-py/kvikio_cu13-*.whl .whl-py/libkvikio_cu13-*.whl .whl-py/rapids_logger-*.whl 2>/dev/null && echo "kvikio installed" || echo "kvikio not installed (kvikio-pread will be skipped)"

step "pip install ./python (HDF5 1.14.5 headers from build/deps)"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
HDF5_ROOT="$root/build/deps/hdf5-1.14.5" $py -m pip install -q --no-build-isolation --no-deps --no-index ./python \
  || { echo "INSTALL FAILED"; exit 1; }

step "tests (GPU ones included)"
(cd python && $py -m pytest -q -rs tests) || status=1
step "the one-libhdf5 check after GPU I/O"
$py - <<'PY' || status=1
import h5gds, h5py, numpy as np, os, tempfile
from h5gds._lib import loaded_libhdf5
p = os.path.join(tempfile.mkdtemp(), "x.h5")
with h5py.File(p, "w", driver="gds") as f:
    h5gds.create_dataset(f, "x", data=np.arange(1 << 20, dtype="f4"))
    x = h5gds.read(f["x"])
    print(type(x), h5gds.last_route(), loaded_libhdf5())
    assert len(loaded_libhdf5()) == 1
PY
fi

if [ "$parts" != none ]; then
  mkdir -p build/bench-py
  if [[ ",$parts," == *",whole,"* ]]; then
    step "benchmark whole, beside the C h5gds-bench (GDS) in the same run"
    cbench=""
    if cmake -S . -B build/gpu-h14 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHDF5_ROOT="$root/build/deps/hdf5-1.14.5" >/dev/null \
       && ninja -C build/gpu-h14 h5gds-bench >/dev/null; then
      cbench="$root/build/gpu-h14/tools/h5gds-bench"
    else
      echo "C h5gds-bench build FAILED (its rows will say skipped)"; status=1
    fi
    $py -m h5gds.bench whole --repeat "${WHOLE_REPEAT:-1}" --c-bench "$cbench" --dir "$root/build/bench-py" \
      --out "$out/whole" || status=1
  fi
  lparts=$(echo "$parts" | tr ',' '\n' | grep -E '^loader(-train)?$' | paste -sd, -)
  if [ -n "$lparts" ]; then
    step "benchmark $lparts (medians of ${LOADER_REPEAT:-3})"
    $py -m h5gds.bench "$lparts" --repeat "${LOADER_REPEAT:-3}" --read-bytes "${LOADER_READ:-256MiB}" \
      --dir "$root/build/bench-py" --out "$out/loader" || status=1
  fi
  if [[ ",$parts," == *",loader-ab,"* ]]; then
    step "benchmark loader A/B: threads=16, and no read-ahead (h5gds-loader only)"
    $py -m h5gds.bench loader --methods h5gds-loader --config threads=16 --repeat "${LOADER_REPEAT:-3}" \
      --read-bytes "${LOADER_READ:-256MiB}" --dir "$root/build/bench-py" --out "$out/loader-t16" || status=1
    H5GDS_TEST_NO_LOOKAHEAD=1 $py -m h5gds.bench loader --methods h5gds-loader --repeat "${LOADER_REPEAT:-3}" \
      --read-bytes "${LOADER_READ:-256MiB}" --dir "$root/build/bench-py" --out "$out/loader-nolookahead" || status=1
  fi
  oparts=$(echo "$parts" | tr ',' '\n' | grep -vE '^(whole|loader|loader-train|loader-ab)$' | paste -sd, -)
  if [ -n "$oparts" ]; then
    step "benchmark $oparts"
    # shellcheck disable=SC2086  # H5GDS_BENCH_ARGS: several options, split on purpose
    $py -m h5gds.bench "$oparts" --dir "$root/build/bench-py" --out "$out/$(echo "$oparts" | tr ',' '-')" ${H5GDS_BENCH_ARGS:-} || status=1
  fi
  rm -rf build/bench-py
fi
step "gpu-python-check: $( [ $status -eq 0 ] && echo PASSED || echo FAILED )"
exit $status
