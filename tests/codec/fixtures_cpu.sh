#!/usr/bin/env bash
# Chunks written by h5py + hdf5plugin decoded by the codec tests' CPU
# references, and chunks those references encode read back by HDF5:
# fixtures_cpu.sh PYTHON TEST_CODEC_GPU SCRATCH (77 without h5py/hdf5plugin;
# H5GDS_PYTHON names another interpreter).
set -euo pipefail
python=${H5GDS_PYTHON:-$1}
test_bin=$2
dir=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import h5py, hdf5plugin' 2>/dev/null; then
  echo "SKIP: $python has no h5py + hdf5plugin (pip install h5py hdf5plugin, or set H5GDS_PYTHON)"
  exit 77
fi
rm -rf "$dir"
mkdir -p "$dir"
"$python" "$here/h5_fixtures.py" make "$dir"
"$test_bin" --fixtures "$dir" --cpu --out "$dir"
"$python" "$here/h5_fixtures.py" verify "$dir"
