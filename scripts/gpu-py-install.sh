#!/usr/bin/env bash
# Installs the Python package on the GPU machine without running its tests
# (what scripts/gpu-python-check.sh does first), for calls that only benchmark.
#   device tool, carry: build/deps/hdf5-1.14.5, .whl-py
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py=${PYTHON:-python3}
$py -m pip install -q --no-index --find-links .whl-py scikit-build-core pathspec packaging
$py -m pip install -q --no-index --no-deps .whl-py/kvikio_cu13-*.whl .whl-py/libkvikio_cu13-*.whl \
  .whl-py/rapids_logger-*.whl 2>/dev/null || echo "kvikio not installed"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} HDF5_ROOT="$root/build/deps/hdf5-1.14.5" \
  $py -m pip install -q --no-build-isolation --no-deps --no-index ./python
echo "h5gds installed"
