#!/usr/bin/env bash
# The main job: installs what is missing, builds h5gds (against HDF5 1.14.5
# built from Debian's source package) and runs h5gds-bench. With a GPU it
# compares the paper's methods and h5gds's paths from device memory; without
# one it runs the host-memory comparison (sec2, direct, gds) in a temporary
# directory. Arguments go to h5gds-bench (default --quick; see --help).
#   bash scripts/bench.sh [--full | --sizes 1GiB,4GiB | ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build-hdf5.sh "$root/build/deps"
cmake -S . -B build/h14 -G Ninja -DH5GDS_WERROR=ON -DHDF5_ROOT="$root/build/deps/hdf5-1.14.5" >build/cmake-bench.log \
  || { cat build/cmake-bench.log; exit 1; }
ninja -C build/h14 h5gds-bench >/dev/null
mkdir -p build/bench
export LD_LIBRARY_PATH="$root/build/deps/hdf5-1.14.5/lib:${LD_LIBRARY_PATH:-}"
[ $# -gt 0 ] || set -- --quick
exec build/h14/tools/h5gds-bench --csv build/bench/h5gds-bench.csv "$@"
