#!/usr/bin/env bash
# HDF5's parallel benchmark h5perf (PHDF5 API, host buffers), unmodified, on
# the gds_mpio driver through the preload library: H5Pset_fapl_mpio in
# h5perf becomes gds_mpio. Passes when every run exits 0, prints no error
# (assertion, HDF5 error stack, read-data mismatch of -D v), and the driver's
# statistics (H5GDS_STATS=1: one line per rank and file close) show that
# the engine moved at least every raw byte h5perf wrote and read: the raw
# data really took the gds path.
#   usage: test_h5perf_preload.sh H5PERF PRELOAD_LIB WORKDIR NP MPIEXEC [MPIEXEC ARGS...]
# H5GDS_H5PERF_OUT=FILE keeps the outputs (the GPU benchmark does).
set -uo pipefail
h5perf=$1 preload=$(readlink -f "$2") work=$3 np=$4; shift 4
launch=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
[ -x "$h5perf" ] || { echo "FAIL no h5perf at $h5perf"; exit 1; }
[ -f "$preload" ] || { echo "FAIL no preload library at $preload"; exit 1; }
pass=0 fail=0
# per rank and dataset 1 MiB (h5perf's -e), 2 datasets, 2 iterations
per_rank=$((1 << 20)) dsets=2 iters=2
expect=$((per_rank * dsets * iters * np))
# name | h5perf options
runs=("contiguous-collective|-C"
      "contiguous-independent|"
      "chunked-interleaved-independent|-c -I")
for entry in "${runs[@]}"; do
  name=${entry%%|*} opts=${entry#*|}
  log="$work/$name.txt"
  # shellcheck disable=SC2086
  timeout 300 "${launch[@]}" -np "$np" -x LD_PRELOAD="$preload" -x H5GDS_STATS=1 -x HDF5_PARAPREFIX="$work" \
    "$h5perf" -A phdf5 -p "$np" -P "$np" -e 1M -x 256K -X 256K -B 64K -i $iters -d $dsets -F 1 -D v $opts >"$log" 2>&1
  rc=$?
  stats=$(grep -c 'h5gds-mpio stats' "$log")
  wrote=$(sed -n 's/.*h5gds-mpio stats.*engine write \([0-9]*\) B.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  read_=$(sed -n 's/.*h5gds-mpio stats.* read \([0-9]*\) B.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  errors=$(grep -v 'h5gds-mpio stats' "$log" | grep -ciE 'assertion failed|read data error|HDF5-DIAG|error')
  what="rc=$rc, $stats gds_mpio file closes, engine wrote $wrote B and read $read_ B (h5perf moved $expect B each way), $errors error lines"
  if [ $rc -eq 0 ] && [ "$errors" -eq 0 ] && [ "$wrote" -ge $expect ] && [ "$read_" -ge $expect ] \
     && grep -q 'Read (2 iteration' "$log"; then
    echo "PASS h5perf $name ($what)"; pass=$((pass + 1))
  else
    echo "FAIL h5perf $name ($what)"; fail=$((fail + 1)); tail -n 25 "$log" | sed 's/^/    /'
  fi
  [ -n "${H5GDS_H5PERF_OUT:-}" ] && { echo "=== h5perf $name: h5perf -A phdf5 -e 1M -x 256K -X 256K -B 64K -i $iters -d $dsets -F 1 -D v $opts"; cat "$log"; } >>"$H5GDS_H5PERF_OUT"
done
echo "h5perf on gds_mpio, $np ranks: $pass passed, $fail failed"
[ $fail -eq 0 ]
