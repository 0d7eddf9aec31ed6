#!/usr/bin/env bash
# Deflate compression on the GPU by piece size (H5GDS_DEFLATE_PIECE_KIB; 0:
# chunks compressed whole), chunks already in device memory: the codec's
# own bench (tests/codec, --bench-deflate) once per size, sizes in turn and
# the whole set twice, so that a drift shows.
#   bash bench/tools/deflate-pieces-ab.sh [MiB] [sizes...]   (default 256; 0 16 32 64 128)
# Builds tests/codec into build/codec-gpu when it is not there. With
# H5GDS_CODEC_DEBUG=1 each encode's sub-batches print where their time went
# (nvCOMP, the join, the framing). ROUNDS (default 2) sets the rounds.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
mib="${1:-256}"
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(0 16 32 64 128)
if [ -z "${H5GDS_NVCOMP_LIB:-}" ] && [ -f .device-carry/nvcomp/libnvcomp.so.6 ]; then
  export H5GDS_NVCOMP_LIB="$root/.device-carry/nvcomp/libnvcomp.so.6"
fi
if [ ! -x build/codec-gpu/test_codec_gpu ]; then
  cmake -S tests/codec -B build/codec-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DH5GDS_WERROR=ON >/dev/null
  cmake --build build/codec-gpu -j "$(nproc)" >/dev/null
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for k in "${sizes[@]}"; do
    echo "== round $round, pieces of $k KiB"
    H5GDS_DEFLATE_PIECE_KIB="$k" build/codec-gpu/test_codec_gpu --require --bench-deflate "$mib" 2>&1 | grep -E "^(bench|Deflate|FAIL)|codec: encode: .*nvCOMP inputs"
  done
done
