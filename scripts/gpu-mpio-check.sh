#!/usr/bin/env bash
# The gds_mpio driver on the GPU machine (no MPI, no network there): builds
# h5gds against the parallel HDF5 1.14.5 and Open MPI 5.0.11 that
# scripts/prepare-gpu-mpio.sh made on a CPU machine, then runs every mpio
# test: device buffers on every rank (2 and 4 ranks sharing the GPU), mixed
# device/host ranks in one collective call, the preload and plugin routes,
# and HDF5's parallel test programs under the preload library (2 and 3 ranks).
#
#   on the CPU machine, once:  bash scripts/prepare-gpu-mpio.sh
#   device run, carrying .device/ompi5 and .device/hdf5-1.14.5-parallel:
#       bash scripts/gpu-mpio-check.sh
# Logs and the CTest summary go to $OUT (or build/gpu-mpio-out).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
ompi="$root/.device/ompi5"
h5="$root/.device/hdf5-1.14.5-parallel"
for d in "$ompi/bin/mpicc" "$h5/lib/libhdf5.so" "$h5/testpar/testphdf5"; do
  [ -e "$d" ] || { echo "gpu-mpio-check: $d missing: run scripts/prepare-gpu-mpio.sh and carry .device/"; exit 2; }
done
out="${OUT:-$root/build/gpu-mpio-out}"
mkdir -p "$out"
export OPAL_PREFIX="$ompi" PATH="$ompi/bin:$PATH"
export LD_LIBRARY_PATH="$ompi/lib:$h5/lib:$h5/testpar:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# The engine's tuning cache of these test runs stays here, apart from the
# one benchmarks use (~/.cache/h5gds/tune.json).
export XDG_CACHE_HOME="$out/cache"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null | tee "$out/gpus.txt" || echo "no nvidia-smi"

cmake -S . -B build/gpu-mpio -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHDF5_ROOT="$h5" \
  -DMPI_C_COMPILER="$ompi/bin/mpicc" -DMPIEXEC_EXECUTABLE="$ompi/bin/mpirun" \
  -DH5GDS_HDF5_TESTPAR_DIR="$h5/testpar" >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; echo BUILD FAILED; exit 1; }
ninja -C build/gpu-mpio >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; echo BUILD FAILED; exit 1; }

status=0
# GPU tests first (device buffers), then the host ones and HDF5's programs.
(cd build/gpu-mpio && ctest --output-on-failure -L gpu -R mpio 2>&1) | tee "$out/ctest-gpu.txt" || status=1
grep -q 'tests passed' "$out/ctest-gpu.txt" && ! grep -q 'Skipped' "$out/ctest-gpu.txt" || {
  echo "gpu-mpio-check: GPU tests skipped or failed (see above)"; status=1; }
(cd build/gpu-mpio && ctest --output-on-failure -L mpio -LE gpu 2>&1) | tee "$out/ctest-host.txt" || status=1
cp -r build/gpu-mpio/tests/scratch/hdf5_testpar_np* "$out/" 2>/dev/null || true
echo "gpu-mpio-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
