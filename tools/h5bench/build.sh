#!/usr/bin/env bash
# Builds h5bench's write/read kernels with h5gds's edits (device buffers,
# the gds_mpio driver): a fresh copy of h5bench's sources, the edits of
# tools/h5bench/apply.py, then the MPI compiler. Nothing is downloaded: the
# sources are a copy of github.com/hpc-io/h5bench obtained beforehand
# (.device/h5bench-src: h5bench_patterns/h5bench_{write,read}.c,
# commons/h5bench_util.{c,h}, commons/async_adaptor.h; COMMIT names the commit).
#   tools/h5bench/build.sh SRC OUT H5GDS_BUILD HDF5_PREFIX [MPICC]
#     SRC          the copy of h5bench's sources (not changed)
#     OUT          where the edited sources and bin/h5bench_{write,read} go
#     H5GDS_BUILD  a CMake build of this project with gds_mpio (src/mpio/libh5gds_mpio.so)
#     HDF5_PREFIX  the parallel HDF5 that build used (include/, lib/)
#     MPICC        the MPI compiler that HDF5 was built with (default: mpicc)
#   H5GDS_WERROR=1 makes h5gds's file's warnings errors (the project's own builds).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src=$(readlink -f "${1:?SRC}"); out=${2:?OUT}; build=$(readlink -f "${3:?H5GDS_BUILD}"); hdf5=$(readlink -f "${4:?HDF5_PREFIX}")
mpicc=${5:-mpicc}
for f in h5bench_patterns/h5bench_write.c h5bench_patterns/h5bench_read.c commons/h5bench_util.c \
         commons/h5bench_util.h commons/async_adaptor.h; do
  [ -f "$src/$f" ] || { echo "h5bench build: $src/$f missing (copy h5bench's sources there first)" >&2; exit 1; }
done
[ -f "$build/src/mpio/libh5gds_mpio.so" ] || { echo "h5bench build: no $build/src/mpio/libh5gds_mpio.so" >&2; exit 1; }
cuda_inc=$(sed -n 's/^H5GDS_CUDA_H_DIR:PATH=//p' "$build/CMakeCache.txt")
cufile_inc=$(sed -n 's/^H5GDS_CUFILE_H_DIR:PATH=//p' "$build/CMakeCache.txt")
rm -rf "$out/src" && mkdir -p "$out/src" "$out/bin"
cp -r "$src/h5bench_patterns" "$src/commons" "$out/src/"
python3 "$here/apply.py" "$out/src"
inc=(-I"$out/src/commons" -I"$here" -I"$root/include" -I"$root/src/cuda" -I"$cuda_inc" -I"$cufile_inc" -I"$hdf5/include")
libs=("$build/src/mpio/libh5gds_mpio.so" "$build/src/libh5gds.so" "$build/src/libh5gds_cuda.a" -L"$hdf5/lib" -lhdf5
      -ldl -lpthread -lm -Wl,-rpath,"$build/src/mpio:$build/src:$hdf5/lib")
# h5gds's file shows the project's warnings (errors with H5GDS_WERROR=1, as in
# the project's own builds); h5bench's own code is compiled as it is.
werror=()
case "${H5GDS_WERROR:-0}" in 1|ON|on|yes|true) werror=(-Werror) ;; esac
"$mpicc" -std=gnu11 -O2 -Wall -Wextra "${werror[@]}" "${inc[@]}" -c "$here/h5bench_gds.c" -o "$out/src/h5bench_gds.o"
"$mpicc" -std=gnu11 -O2 -w "${inc[@]}" -c "$out/src/commons/h5bench_util.c" -o "$out/src/h5bench_util.o"
for k in write read; do
  "$mpicc" -std=gnu11 -O2 -w "${inc[@]}" "$out/src/h5bench_patterns/h5bench_$k.c" "$out/src/h5bench_util.o" \
    "$out/src/h5bench_gds.o" "${libs[@]}" -o "$out/bin/h5bench_$k"
done
echo "h5bench build: $out/bin/h5bench_write, $out/bin/h5bench_read (h5bench $(head -n1 "$src/COMMIT" 2>/dev/null || echo '?'))"
