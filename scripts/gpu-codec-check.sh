#!/usr/bin/env bash
# The GPU codecs (src/codec) on a GPU machine without HDF5 headers: builds
# the codec and its tests as a project of their own (tests/codec), runs the
# unit tests, the GPU test, the chunks h5py + hdf5plugin wrote (fixtures,
# when present) and the throughput bench.
#   bash scripts/gpu-codec-check.sh [--bench MiB (0: none)] [--no-selftest]
# nvCOMP: $H5GDS_NVCOMP_LIB, else .device-carry/nvcomp/libnvcomp.so.6, else
# the system's. Fixtures (made where h5py + hdf5plugin are installed):
#   python3 tests/codec/h5_fixtures.py make build/codec-fixtures
#   mkdir -p .codec-fixtures && for f in build/codec-fixtures/*.fx; do gzip -c $f >.codec-fixtures/${f##*/}.gz; done
# the chunks the GPU encodes from them go to $OUT/codec-enc.tar.gz: unpack
# it into build/codec-fixtures and run `h5_fixtures.py verify build/codec-fixtures`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/codec-check-out}"
build="$root/build/codec-gpu"
bench_mib=256
selftest=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench_mib="$2"; shift 2 ;;
    --no-selftest) selftest=0; shift ;;
    *) echo "usage: $0 [--bench MiB] [--no-selftest]"; exit 2 ;;
  esac
done
mkdir -p "$out"
log="$out/codec-check.log"
exec > >(tee "$log") 2>&1

if [ -z "${H5GDS_NVCOMP_LIB:-}" ] && [ -f "$root/.device-carry/nvcomp/libnvcomp.so.6" ]; then
  export H5GDS_NVCOMP_LIB="$root/.device-carry/nvcomp/libnvcomp.so.6"
fi
echo "== nvCOMP: ${H5GDS_NVCOMP_LIB:-(system)}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

gen=(-G Ninja)
command -v ninja >/dev/null || gen=()
cmake -S tests/codec -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DH5GDS_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)" | grep -v '^\[' || true
[ -x "$build/test_codec_gpu" ] || { echo "build failed"; exit 1; }

status=0
echo "== unit"
"$build/test_codec_unit" || status=1
if [ "$selftest" = 1 ]; then
  echo "== GPU: CPU-encoded chunks decoded on the GPU, GPU-encoded ones on the CPU, corrupt chunks"
  "$build/test_codec_gpu" --require || status=1
  echo "== GPU: the same, every Deflate batch in segments, every zstd chunk block by block"
  H5GDS_INFLATE_SPLIT=1 H5GDS_ZSTD_BLOCKS=1 "$build/test_codec_gpu" --require || status=1
  echo "== GPU: garbage inside valid framing (a child process per case)"
  "$build/test_codec_gpu" --require --hostile || status=1
  echo "== GPU: little of the device's memory free"
  H5GDS_CODEC_DEBUG=1 "$build/test_codec_gpu" --require --pressure || status=1
fi
if ls .codec-fixtures/*.fx.gz >/dev/null 2>&1; then
  echo "== fixtures written by h5py + hdf5plugin"
  fx="$build/fixtures"
  rm -rf "$fx" && mkdir -p "$fx/enc"
  for f in .codec-fixtures/*.fx.gz; do gunzip -c "$f" >"$fx/$(basename "${f%.gz}")"; done
  "$build/test_codec_gpu" --require --fixtures "$fx" --out "$fx/enc" || status=1
  tar -C "$fx/enc" -czf "$out/codec-enc.tar.gz" .
fi
if [ "$bench_mib" -gt 0 ]; then
  echo "== throughput ($bench_mib MiB per pipeline, chunks in device memory)"
  H5GDS_CODEC_DEBUG=1 "$build/test_codec_gpu" --require --bench "$bench_mib" >"$build/bench.txt" 2>&1 || status=1
  grep -v '^h5gds codec' "$build/bench.txt" || true
  echo "-- batches (H5GDS_CODEC_DEBUG)"
  grep '^h5gds codec' "$build/bench.txt" | sort | uniq -c || true
fi
echo "== status $status"
exit $status
