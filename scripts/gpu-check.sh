#!/usr/bin/env bash
# Builds h5gds on the GPU machine and runs every GPU test there, in both
# cuFile states, plus a compute-sanitizer pass and (with --bench) the
# benchmark. Run from the repository root; logs go to $OUT (or build/gpu-out).
#   run through the device tool:  bash scripts/gpu-check.sh [--bench main|paper|engine|... [SIZES]]
#   (carry build/deps/hdf5-1.14.5)
# It expects HDF5 1.14.5 prebuilt in build/deps/hdf5-1.14.5 (carried along;
# made by scripts/build-hdf5.sh) and uses the machine's HDF5 1.10 if present.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
log="$out/gpu-check.log"
exec > >(tee -a "$log") 2>&1
step() { printf '\n== %s\n' "$*"; }
status=0

step "machine"
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
nproc; uname -r; df -h . | tail -1
ls /usr/local/cuda/include/cufile.h /usr/local/cuda/lib64/libcufile.so* 2>/dev/null | head -3

export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
builds=()
# H5GDS_GPU_BUILDS=h14 leaves out the distribution's HDF5 (a shorter call).
want_builds=${H5GDS_GPU_BUILDS:-h14,h10}
if [ -f build/deps/hdf5-1.14.5/lib/libhdf5.so ] && [[ ",$want_builds," == *,h14,* ]]; then
  step "build against HDF5 1.14.5"
  cmake -S . -B build/gpu-h14 -G Ninja -DHDF5_ROOT="$root/build/deps/hdf5-1.14.5" >/dev/null && ninja -C build/gpu-h14 >/dev/null \
    && builds+=(build/gpu-h14) || { echo "BUILD FAILED (1.14.5)"; status=1; }
fi
if { [ -f /usr/include/hdf5/serial/hdf5.h ] || [ -f /usr/include/hdf5.h ]; } && [[ ",$want_builds," == *,h10,* ]]; then
  step "build against the distribution's HDF5"
  cmake -S . -B build/gpu-h10 -G Ninja >/dev/null && ninja -C build/gpu-h10 >/dev/null \
    && builds+=(build/gpu-h10) || { echo "BUILD FAILED (system HDF5)"; status=1; }
fi
export LD_LIBRARY_PATH="$root/build/deps/hdf5-1.14.5/lib:${LD_LIBRARY_PATH:-}"

udev_entry="/run/udev/data/b$(stat -c '%Hd:%Ld' /)"
cufile_tests='^gpu_(cufile|cufile_registered|faults_cufile)$'
for b in "${builds[@]}"; do
  step "$b: all tests but the large ones and those that need cuFile to work"
  rm -f "$udev_entry"
  # H5GDS_GPU_ONLY=1: the GPU-labelled tests alone (CI runs the others on every change)
  labels=(-LE large); [ "${H5GDS_GPU_ONLY:-0}" = 1 ] && labels=(-L gpu -LE large)
  (cd "$b" && ctest --output-on-failure "${labels[@]}" -E "$cufile_tests") || status=1
  step "$b: cuFile asked for where it cannot register the file (no udev entry): staged, one fallback"
  (cd "$b" && H5GDS_TEST_DIR="$root/$b/tests/scratch/gpu_cufile" H5GDS_EXPECT_ROUTE=staged H5GDS_EXPECT_FALLBACKS=1 \
     tests/test_gpu "mode=cufile") || status=1
done
b=${builds[0]}
step "$b: cuFile with a udev entry for the root disk (test set-up only)"
mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' > "$udev_entry"
(cd "$b" && ctest --output-on-failure -R "$cufile_tests") || status=1
step "$b: large GPU test (4 GiB + 4099 bytes, one request)"
(cd "$b" && ctest --output-on-failure -L large) || status=1
rm -f "$udev_entry"

if command -v compute-sanitizer >/dev/null; then
  step "compute-sanitizer memcheck: staged path, small blocks"
  mkdir -p build/sanitizer && H5GDS_TEST_DIR=$root/build/sanitizer H5GDS_EXPECT_ROUTE=staged compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$b/tests/test_gpu" "mode=staged,threads=2,io_block_size=1MiB,staging_size=256KiB" >"$out/sanitizer.log" 2>&1
  rc=$?; tail -5 "$out/sanitizer.log"; [ $rc -eq 0 ] || { echo "SANITIZER FAILED ($rc)"; status=1; }
fi

if [ "${1:-}" = "--bench" ]; then
  parts=${2:-main}
  shift $(( $# >= 2 ? 2 : 1 ))
  for part in ${parts//,/ }; do  # --bench engine,main [SIZES]
    step "benchmark: $part"
    bash scripts/bench-gpu.sh "$part" "$@" || status=1
  done
fi
step "gpu-check: $( [ $status -eq 0 ] && echo PASSED || echo FAILED )"
exit $status
