#!/usr/bin/env bash
# The shared-file benchmark of the gds_mpio driver (issue 16) on a GPU
# machine, in one device call: parallel HDF5 writes and reads one shared file
# from device memory (GDS-SHARED) beside HDF5's mpio driver through a pageable
# host copy (MPIO-HOST), file per rank (GDS) and the node's ceilings; then
# HDF5's h5perf under the preload library and h5bench's write/read kernels
# with device buffers as clients.
#
# Carried (ignored by git; made on the CPU machine):
#   .device/ompi5, .device/hdf5-1.14.5-parallel   bash scripts/prepare-gpu-mpio.sh
#   .device/h5bench-src                           a copy of hpc-io/h5bench's sources (tools/h5bench/build.sh
#                                                 lists the files; fetched beforehand, nothing at run time)
# Device run (repository root):
#   bash scripts/bench-gpu-mpio.sh [--bench] [PARTS]
#     PARTS: comma list of np4,boundary,np1,h5perf,h5bench (default: all)
#   H5GDS_BENCH_SIZE (default 1GiB per rank), H5GDS_BENCH_REPEAT (2), H5GDS_BENCH_NP (4 ranks sharing the
#   node's GPUs), H5GDS_BOUNDARY_SIZE (128MiB per rank), H5GDS_BENCH_MEMORY (device; host on a CPU machine,
#   to check the script). About 4-5 minutes on the H100 machine with the defaults (estimated: not run
#   there yet); split it over two calls with PARTS (np4,boundary,np1 then h5perf,h5bench) if needed. Results in $OUT (else build/gpu-out-mpio), at most 8 files:
#     np4.csv  np1.csv  serial.csv  boundary-4096.csv  boundary-4099.csv  h5perf.txt  h5bench.txt  summary.md
#   (summary.md: the goals of issue 16 from the CSVs, then every command run).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[ "${1:-}" = --bench ] && shift
parts=",${1:-np4,boundary,np1,h5perf,h5bench},"
size=${H5GDS_BENCH_SIZE:-1GiB} repeat=${H5GDS_BENCH_REPEAT:-2} np=${H5GDS_BENCH_NP:-4}
bsize=${H5GDS_BOUNDARY_SIZE:-128MiB} memory=${H5GDS_BENCH_MEMORY:-device}
out="${OUT:-$root/build/gpu-out-mpio}"
mkdir -p "$out"
cmds="$out/.commands"
: >"$cmds"
ompi="$root/.device/ompi5" hdf5="$root/.device/hdf5-1.14.5-parallel"
for d in "$ompi/bin" "$hdf5/lib"; do
  [ -d "$d" ] || { echo "bench-gpu-mpio: $d missing: run scripts/prepare-gpu-mpio.sh on the CPU machine and carry .device/ompi5 and .device/hdf5-1.14.5-parallel"; exit 1; }
done
export OPAL_PREFIX="$ompi" PATH="$ompi/bin:$PATH"
export LD_LIBRARY_PATH="$ompi/lib:$hdf5/lib:$hdf5/testpar:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
status=0
# run NAME TIMEOUT CMD...: logged, bounded, its failure noted and the next part run
run() {
  local t=$1; shift
  echo "+ $*" | tee -a "$cmds"
  timeout "$t" "$@" || { echo "bench-gpu-mpio: FAILED (exit $?): $*" | tee -a "$cmds"; status=1; }
}

# Build: the driver, the preload library and the bench against the carried
# parallel HDF5 and Open MPI (tests not built: scripts/gpu-mpio-check.sh runs them).
build=build/gpu-mpiobench
t0=$(date +%s)
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_BUILD_TESTS=OFF -DHDF5_ROOT="$hdf5" \
  -DMPI_C_COMPILER="$ompi/bin/mpicc" >$build.configure.log 2>&1 \
  && ninja -C $build h5gds-bench h5gds_mpio_preload >$build.log 2>&1 \
  || { echo "bench-gpu-mpio: BUILD FAILED"; tail -30 $build.configure.log $build.log; exit 1; }
echo "build: $(($(date +%s) - t0)) s"
bench=$build/tools/h5gds-bench
launch=(mpirun --bind-to none --oversubscribe)
common=(--memory "$memory" --dir "$root/build")

# 1. NP ranks on the node's GPUs (4 sharing one H100): the shared file
# beside mpio with a host copy, file per rank and the ceilings.
if [[ $parts == *,np4,* ]]; then
  run 200 "${launch[@]}" -np "$np" "$bench" "${common[@]}" --sizes "$size" --repeat "$repeat" \
    --methods GDS-SHARED,MPIO-HOST,GDS --csv "$out/np4.csv"
fi
# 2. Rank boundaries every 4099 elements (almost every 4 KiB block of the file
# shared by two ranks) against every 4096 (none shared): same bytes, same pieces.
if [[ $parts == *,boundary,* ]]; then
  for n in 4096 4099; do
    run 120 "${launch[@]}" -np "$np" "$bench" "${common[@]}" --sizes "$bsize" --repeat "$repeat" --no-ceilings \
      --methods GDS-SHARED,MPIO-HOST --boundary $n --csv "$out/boundary-$n.csv"
  done
fi
# 3. One rank of gds_mpio against the serial gds driver (no mpirun) and file per rank at 1 rank.
if [[ $parts == *,np1,* ]]; then
  run 120 "${launch[@]}" -np 1 "$bench" "${common[@]}" --sizes "$size" --repeat "$repeat" --no-ceilings \
    --methods GDS-SHARED,GDS --csv "$out/np1.csv"
  run 120 "$bench" "${common[@]}" --sizes "$size" --repeat "$repeat" --no-ceilings --methods GDS --csv "$out/serial.csv"
fi
# 4. h5perf (HDF5's parallel benchmark, unmodified, host buffers): the CI
# check at 2 ranks (raw bytes through the engine), then NP ranks of larger
# transfers with and without the preload library (gds_mpio vs mpio).
if [[ $parts == *,h5perf,* ]]; then
  h5perf=$hdf5/testpar/h5perf
  preload=$build/src/mpio/libh5gds_mpio_preload.so
  : >"$out/h5perf.txt"
  echo "+ H5GDS_H5PERF_OUT=h5perf.txt tests/test_h5perf_preload.sh $h5perf $preload build/h5perf-check 2 mpirun --oversubscribe" >>"$cmds"
  H5GDS_H5PERF_OUT="$out/h5perf.txt" timeout 120 tests/test_h5perf_preload.sh "$h5perf" "$preload" \
    "$root/build/h5perf-check" 2 "${launch[@]}" || status=1
  mkdir -p "$root/build/h5perf"
  for with in gds_mpio mpio; do
    pre=(); [ $with = gds_mpio ] && pre=(-x LD_PRELOAD="$(readlink -f "$preload")" -x H5GDS_STATS=1)
    # without the preload library also MPI-IO and POSIX alone, h5perf's own references
    apis=phdf5; [ $with = mpio ] && apis=phdf5,mpiio,posix
    args=(-A $apis -p "$np" -P "$np" -e 256M -x 16M -X 16M -i 2 -d 1 -F 1 -C)
    echo "=== h5perf, $np ranks, PHDF5 on $with: h5perf ${args[*]}" >>"$out/h5perf.txt"
    run 120 "${launch[@]}" -np "$np" "${pre[@]}" -x HDF5_PARAPREFIX="$root/build/h5perf" "$h5perf" "${args[@]}" \
      >>"$out/h5perf.txt" 2>&1
  done
fi
# 5. h5bench's write and read kernels (1-D contiguous particles, 2 time
# steps, collective data and metadata): device arrays through gds_mpio, then
# h5bench as it is (host arrays, mpio) on the same sizes.
if [[ $parts == *,h5bench,* ]]; then
  hb=$build/h5bench
  if [ ! -f .device/h5bench-src/h5bench_patterns/h5bench_write.c ]; then
    echo "bench-gpu-mpio: .device/h5bench-src missing (carry it): h5bench skipped" | tee -a "$out/h5bench.txt"
    status=1
  elif run 120 tools/h5bench/build.sh .device/h5bench-src $hb $build "$hdf5" "$ompi/bin/mpicc" >"$hb.build.log" 2>&1; then
    particles=${H5GDS_H5BENCH_PARTICLES:-8388608}  # 32 B each: 256 MiB per rank and time step
    for kind in write read; do
      op=WRITE; [ $kind = read ] && op=READ
      { printf 'IO_OPERATION=%s\nMEM_PATTERN=CONTIG\nFILE_PATTERN=CONTIG\nTIMESTEPS=2\nDELAYED_CLOSE_TIMESTEPS=0\n' $op
        printf 'COLLECTIVE_DATA=YES\nCOLLECTIVE_METADATA=YES\nEMULATED_COMPUTE_TIME_PER_TIMESTEP=0 s\nNUM_DIMS=1\n'
        printf 'DIM_1=%s\nDIM_2=1\nDIM_3=1\n' "$particles"
        [ $kind = read ] && printf 'READ_OPTION=FULL\n'; } >"$hb/$kind.cfg"
    done
    : >"$out/h5bench.txt"
    for variant in "gds_mpio $memory" "mpio host"; do
      set -- $variant
      env=(-x H5GDS_H5BENCH_FAPL=$1 -x H5GDS_H5BENCH_MEMORY=$2 -x H5GDS_H5BENCH_VERIFY=1)
      [ $1 = gds_mpio ] && env+=(-x H5GDS_STATS=1)
      for kind in write read; do
        [ $kind = read ] && [ "$(id -u)" = 0 ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }  # cold read
        echo "=== h5bench_$kind, $np ranks, $1, $2 memory ($(tr '\n' ' ' <"$hb/$kind.cfg"))" >>"$out/h5bench.txt"
        run 120 "${launch[@]}" -np "$np" "${env[@]}" $hb/bin/h5bench_$kind "$hb/$kind.cfg" "$root/build/h5bench.h5" \
          >>"$out/h5bench.txt" 2>&1
      done
    done
    rm -f "$root/build/h5bench.h5"
  else
    cat "$hb.build.log" >>"$out/h5bench.txt"
  fi
fi

{ python3 tools/summarize_shared.py "$out"
  echo; echo "## Commands (repository root, $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"; echo
  sed 's/^/    /' "$cmds"; } >"$out/summary.md"
rm -f "$cmds"
cat "$out/summary.md"
exit $status
