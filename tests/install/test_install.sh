#!/bin/sh
# cmake --install into a scratch prefix, then a consumer project built against
# the installed tree with find_package(h5gds) and with pkg-config, run.
#   test_install.sh BUILD SCRATCH CMAKE GENERATOR CC MPI(0|1) PLUGIN(0|1) [HDF5_LIBDIR]
# The plugin component goes to HDF5's default plugin directory, an absolute
# path outside the prefix: it is installed under DESTDIR=SCRATCH/root here.
set -eu
build=$1 scratch=$2 cmake=$3 generator=$4 cc=$5 mpi=$6 plugin=$7 hdf5_libdir=${8:-}
here=$(cd "$(dirname "$0")" && pwd)
prefix=$scratch/prefix
rm -rf "$scratch"
mkdir -p "$scratch"
# Installed libraries and programs find libh5gds, libhdf5 and MPI by their
# RUNPATHs alone (cmake/rpath.cmake): nothing here sets LD_LIBRARY_PATH.
# HDF5_LIBDIR is only checked to be among the bench's.
unset LD_LIBRARY_PATH

fail() { echo "test_install: FAIL: $*" >&2; exit 1; }
# every library a program or library needs is found (ldd: "not found" otherwise)
resolves() { ! ldd "$1" | grep -q "not found" || { ldd "$1"; fail "$2"; }; }

"$cmake" --install "$build" --prefix "$prefix" --component Unspecified >"$scratch/install.log"
for f in include/H5FDgds.h lib/libh5gds.so lib/cmake/h5gds/h5gdsConfig.cmake \
         lib/cmake/h5gds/h5gdsConfigVersion.cmake lib/pkgconfig/h5gds.pc share/h5gds/plot_bench.py \
         share/h5gds/cli_common.py; do
    [ -e "$prefix/$f" ] || fail "$f not installed"
done
if [ "$mpi" = 1 ]; then
    for f in include/H5FDgds_mpi.h lib/libh5gds_mpi.so lib/pkgconfig/h5gds_mpi.pc; do
        [ -e "$prefix/$f" ] || fail "$f not installed"
    done
fi

# find_package
"$cmake" -S "$here/consumer" -B "$scratch/consumer-cmake" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DEXPECT_MPI="$mpi" >"$scratch/consumer-cmake.log" 2>&1 ||
    { cat "$scratch/consumer-cmake.log"; fail "find_package(h5gds) project does not configure"; }
"$cmake" --build "$scratch/consumer-cmake" >>"$scratch/consumer-cmake.log" 2>&1 ||
    { cat "$scratch/consumer-cmake.log"; fail "find_package(h5gds) project does not build"; }
"$scratch/consumer-cmake/consumer" "$scratch/cmake.h5" || fail "consumer built with find_package"
resolves "$prefix/lib/libh5gds.so" "the installed libh5gds does not find its libraries"

# pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists h5gds || fail "pkg-config does not find h5gds"
# shellcheck disable=SC2046
"$cc" -o "$scratch/consumer-pc" "$here/consumer/consumer.c" $(pkg-config --cflags h5gds) \
    $(pkg-config --libs h5gds) $(pkg-config --variable=rpath h5gds) || fail "consumer does not build with pkg-config"
# the rpath variable alone finds libh5gds and HDF5
"$scratch/consumer-pc" "$scratch/pc.h5" || fail "consumer built with pkg-config"
# the installed bench finds the libraries beside it and HDF5 (also an HDF5
# inside this source tree, which CMake's own link-path RUNPATH leaves out)
"$prefix/bin/h5gds-bench" --help >"$scratch/bench-help.txt" 2>&1 ||
    { cat "$scratch/bench-help.txt"; fail "the installed h5gds-bench does not start"; }
if [ -n "$hdf5_libdir" ]; then
    readelf -d "$prefix/bin/h5gds-bench" | grep -q "R.*PATH.*$(cd "$hdf5_libdir" && pwd -P)" ||
        fail "the installed h5gds-bench's RUNPATH lacks HDF5's $hdf5_libdir"
fi
if [ "$mpi" = 1 ]; then
    # --as-needed: the program names only libh5gds_mpi, which must find
    # libh5gds beside it by its own RUNPATH
    # shellcheck disable=SC2046
    "$cc" -o "$scratch/consumer-mpi-pc" "$here/consumer/consumer_mpi.c" $(pkg-config --cflags h5gds_mpi) \
        -Wl,--as-needed $(pkg-config --libs h5gds_mpi) $(pkg-config --variable=rpath h5gds) ||
        fail "h5gds_mpi does not build with pkg-config"
    resolves "$scratch/consumer-mpi-pc" "a program linked to libh5gds_mpi does not find its libraries"
    resolves "$scratch/consumer-cmake/consumer_mpi" "the find_package MPI consumer does not find its libraries"
    resolves "$prefix/lib/libh5gds_mpi.so" "the installed libh5gds_mpi does not find its libraries"
fi
for lib in "$prefix"/lib/libh5gds_mpio*.so; do
    if [ -e "$lib" ]; then
        resolves "$lib" "the installed $(basename "$lib") does not find its libraries"
    fi
done

# The plugin: where the package says, loaded by HDF5_DRIVER=gds.
if [ "$plugin" = 1 ]; then
    dir=$(pkg-config --variable=plugindir h5gds)
    [ -n "$dir" ] || fail "h5gds.pc names no plugin directory"
    DESTDIR="$scratch/root" "$cmake" --install "$build" --prefix "$prefix" --component plugin >>"$scratch/install.log"
    case $dir in
        /*) staged=$scratch/root$dir ;;
        *) staged=$scratch/root$prefix/$dir ;;
    esac
    [ -f "$staged/libh5gds_plugin.so" ] || fail "plugin not installed into $staged"
    HDF5_DRIVER=gds HDF5_PLUGIN_PATH="$staged" "$scratch/consumer-pc" "$scratch/plugin.h5" --env ||
        fail "HDF5_DRIVER=gds with the installed plugin"
fi
echo "test_install: ok"
