#!/usr/bin/env bash
# One device call that builds and runs every GPU test, then benchmarks, in
# stages with their own time limits, and packs what they wrote into at most
# 8 files under $OUT (the device tool's limit): a stage that runs out of time
# is noted and the next one runs.
#   bash scripts/gpu-session.sh STAGES
#   STAGES (comma list, in order):
#     tests       C GPU tests (HDF5 1.14.5 build, both cuFile states, large, sanitizer),
#                 gds_mpio GPU tests, Python tests with the GPU ones
#     checkpoint  python -m h5gds.bench checkpoint,train-loop (fp16 state)
#     loader      python -m h5gds.bench loader,loader-train (+ whole beside the C bench)
#     mpio        scripts/bench-gpu-mpio.sh np4,np1,h5perf,h5bench
#     autotune    scripts/bench-gpu.sh autotune
# PY_READY=1: the Python package was installed by an earlier call on this machine.
# Carry: build/deps/hdf5-1.14.5, .whl-py, .device/ompi5, .device/hdf5-1.14.5-parallel,
#        .device/h5bench-src (each as the stage needs it).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
final="${OUT:-$root/build/gpu-session}"
mkdir -p "$final"
work=$(mktemp -d)
stages=",${1:-tests},"
status=0
stage() { # stage NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  echo "== stage $name ($(date -u +%T), limit ${t}s)"
  mkdir -p "$work/$name"
  OUT="$work/$name" timeout "$t" "$@" >"$work/$name/stage.log" 2>&1
  local rc=$?
  echo "   $name: exit $rc ($(date -u +%T))"; [ $rc -eq 0 ] || status=1
  grep -hE "tests passed|tests failed|FAILED|PASSED|passed|failed" "$work/$name/stage.log" | tail -6 | sed 's/^/   /'
}
if [[ $stages == *,tests,* ]]; then
  stage c-tests "${T_CTESTS:-240}" env H5GDS_GPU_BUILDS=h14 H5GDS_GPU_ONLY=1 bash scripts/gpu-check.sh
  stage mpio-tests "${T_MPIO:-120}" env H5GDS_GPU_ONLY=1 bash scripts/gpu-mpio-check.sh
  stage py-tests "${T_PY:-150}" bash scripts/gpu-python-check.sh none
  PY_READY=1 # installed by that stage: later stages only benchmark
fi
[[ $stages == *,checkpoint,* ]] && stage checkpoint "${T_CKPT:-240}" env H5GDS_PY_BENCH_ONLY="${PY_READY:-0}" \
  H5GDS_BENCH_ARGS="${CKPT_ARGS:---states fp16 --repeat 2 --loop-repeat 1 --verify}" \
  bash scripts/gpu-python-check.sh checkpoint,train-loop
[[ $stages == *,loader,* ]] && stage loader "${T_LOADER:-240}" env H5GDS_PY_BENCH_ONLY="${PY_READY:-0}" LOADER_REPEAT="${LOADER_REPEAT:-2}" \
  bash scripts/gpu-python-check.sh "${LOADER_PARTS:-loader,loader-train}"
[[ $stages == *,whole,* ]] && stage whole "${T_WHOLE:-150}" env H5GDS_PY_BENCH_ONLY="${PY_READY:-0}" bash scripts/gpu-python-check.sh whole
[[ $stages == *,mpio,* ]] && stage mpio "${T_MPIOB:-300}" env H5GDS_BENCH_REPEAT="${MPIO_REPEAT:-2}" \
  bash scripts/bench-gpu-mpio.sh --bench "${MPIO_PARTS:-np4,np1,h5perf,h5bench}"
[[ $stages == *,autotune,* ]] && stage autotune "${T_TUNE:-300}" bash scripts/bench-gpu.sh autotune
# Packing: every CSV, summary and log of the stages in one archive, plus the
# stage logs' tails in session.txt.
shopt -s nullglob
for d in "$work"/*/; do n=$(basename "$d"); { echo "== $n"; tail -40 "$d/stage.log"; } >>"$final/session.txt"; done
tar czf "$final/session.tgz" -C "$work" . && echo "packed: $final/session.tgz ($(du -h "$final/session.tgz" | cut -f1))"
echo "gpu-session: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
