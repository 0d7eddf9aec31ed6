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
# Installed programs find libhdf5 by their RUNPATH; consumers built with
# pkg-config by this path (as any program linking that HDF5 would).
[ -n "$hdf5_libdir" ] && export LD_LIBRARY_PATH="$hdf5_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

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

# pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists h5gds || fail "pkg-config does not find h5gds"
# shellcheck disable=SC2046
"$cc" -o "$scratch/consumer-pc" "$here/consumer/consumer.c" $(pkg-config --cflags h5gds) \
    $(pkg-config --libs h5gds) $(pkg-config --variable=rpath h5gds) || fail "consumer does not build with pkg-config"
# the rpath variable alone finds libh5gds and HDF5
env -u LD_LIBRARY_PATH "$scratch/consumer-pc" "$scratch/pc.h5" || fail "consumer built with pkg-config"
# the installed bench finds the libraries beside it by its RUNPATH (HDF5's
# too, where that HDF5 is outside this source tree: CMake leaves the tree's
# own folders out, hence HDF5's folder on the path above)
"$prefix/bin/h5gds-bench" --help >"$scratch/bench-help.txt" 2>&1 ||
    { cat "$scratch/bench-help.txt"; fail "the installed h5gds-bench does not start"; }
if [ "$mpi" = 1 ]; then
    # shellcheck disable=SC2046
    "$cc" -o "$scratch/consumer-mpi-pc" "$here/consumer/consumer_mpi.c" $(pkg-config --cflags h5gds_mpi) \
        $(pkg-config --libs h5gds_mpi) -Wl,-rpath,"$prefix/lib" || fail "h5gds_mpi does not build with pkg-config"
fi

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
