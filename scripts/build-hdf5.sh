#!/usr/bin/env bash
# Build HDF5 1.14.5 from Debian trixie's `hdf5` source package.
#
# Usage: scripts/build-hdf5.sh [PREFIX_ROOT]      (default: <repo>/build/deps)
#        scripts/build-hdf5.sh --parallel [PREFIX_ROOT]
#            HDF5 1.14.5 with parallel support (MPI) instead, beside the serial
#            one: PREFIX_ROOT/hdf5-1.14.5-parallel{,-build,-src}. MPI: the
#            distribution's Open MPI (libopenmpi-dev), or the MPI whose C
#            compiler wrapper H5_MPI_CC names (another prefix: Open MPI 5 for
#            the GPU machine, scripts/gpu.sh prepare-mpio). Patches:
#            tests/hdf5-suite/*.patch, then tests/hdf5-parallel/*.patch where that folder exists.
#        scripts/build-hdf5.sh --print-source [ETC_APT]
#            only print which archive the source would come from, as chosen
#            from the apt sources under ETC_APT (default /etc/apt): no root,
#            no network (tests/test_hdf5_source.sh feeds it fixture files)
#
# Result:
#   PREFIX_ROOT/hdf5-1.14.5/          install tree (lib/libhdf5.so, include/, bin/)
#   PREFIX_ROOT/hdf5-1.14.5-build/    build tree, kept: HDF5's own test programs
#                                     (bin/, test/H5TEST/...) are run from it by
#                                     tests/hdf5-suite/run-hdf5-tests.sh
#   PREFIX_ROOT/hdf5-1.14.5-src/      unpacked upstream source (+ tests/hdf5-suite/*.patch,
#                                     which touch HDF5's test programs only)
#   PREFIX_ROOT/apt/                  private apt configuration/state/cache
#
# The source comes from `apt-get source` through a PRIVATE apt configuration
# (own sources list, lists, cache and state dirs inside PREFIX_ROOT); the
# machine's apt sources are never changed. On Debian the archive URI is taken
# from the machine's own apt configuration (its mirror). On Ubuntu, whose
# configuration names no Debian archive, it is Debian's own archive
# (deb.debian.org), in the private configuration only: Ubuntu's suites do not
# keep exactly 1.14.5 (plucky had 1.14.5+repack-3, but plucky's end of life
# moves it off the archive its configuration reaches), while Debian trixie
# keeps it for its lifetime. Its signatures are checked against Debian's
# archive keyring (package debian-archive-keyring, in Ubuntu's universe).
#
# Environment knobs:
#   H5_BUILD_JOBS      parallel compile jobs (default: nproc)
#   H5_BUILD_TYPE      CMake build type (default: Release)
#   H5_FORCE=1         ignore the stamp and re-run every step
#   H5_PARALLEL=1      same as --parallel
#   H5_MPI_CC          (parallel) MPI C compiler wrapper (default: mpicc of the distribution)
#   H5_BUILD_TARGETS   (parallel) build only these targets (space separated) and
#                      install only the libraries, headers and CMake config
#                      (a small tree to carry: scripts/gpu.sh prepare-mpio)
set -Eeuo pipefail

HDF5_VERSION=1.14.5
DEBIAN_SUITE=trixie
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
DEBIAN_ARCHIVE=http://deb.debian.org/debian

# ---------------------------------------------------------------- source selection
# Archive URIs of the apt sources under $1 (an /etc/apt), one per line:
# enabled stanzas / lines that are not -security suites.
list_archive_uris() {
    local etc=$1 f
    # deb822 *.sources files
    for f in "$etc"/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
            function flush() {
                if (uris != "" && suites !~ /-security/ && enabled != "no")
                    for (i = 1; i <= split(uris, u, /[ \t]+/); i++) if (u[i] != "") print u[i]
                uris = ""; suites = ""; enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "uris:"    { $1 = ""; uris = $0 }
            tolower($1) == "suites:"  { $1 = ""; suites = $0 }
            tolower($1) == "enabled:" { enabled = tolower($2) }
            END { flush() }
        ' "$f"
    done
    # one-line style: deb [opts] URI suite comp...
    for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '
            $1 != "deb" && $1 != "deb-src" { next }
            { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } }
            $(i+1) !~ /-security/ { print $i }
        ' "$f"
    done
}

# Where the hdf5 source package comes from, for the apt sources under $1:
# prints "URI SUITE KEYRING WHY" (the private deb-src line's parts), or
# fails with a message saying what is supported.
select_hdf5_source() {
    local etc=${1:-/etc/apt} cands uri
    cands=$(list_archive_uris "$etc" | sed 's:[[:space:]]*$::; s:/*$::' | awk '!seen[$0]++')
    # Debian: the machine's own mirror of the main archive (ends in /debian;
    # not debian-security, debian-ports, ...).
    uri=$(printf '%s\n' "$cands" | grep -E '^[a-z+]+://.*/debian$' | head -n1 || true)
    if [ -n "$uri" ]; then
        printf '%s %s %s %s\n' "$uri" "$DEBIAN_SUITE" "$KEYRING" "debian-mirror-from-apt-sources"
        return 0
    fi
    # Ubuntu: Debian's own archive, in the private configuration only.
    if printf '%s\n' "$cands" | grep -qE '^[a-z+]+://.*/ubuntu(-ports)?$'; then
        printf '%s %s %s %s\n' "$DEBIAN_ARCHIVE" "$DEBIAN_SUITE" "$KEYRING" "ubuntu-uses-debian-archive"
        return 0
    fi
    echo "no Debian or Ubuntu archive in the apt sources under $etc (supported: Debian 12, Ubuntu 24.04;" \
         "elsewhere put HDF5 $HDF5_VERSION's Debian source package (hdf5_${HDF5_VERSION}*.dsc and tarballs)" \
         "into <PREFIX_ROOT>/download)" >&2
    return 1
}

if [ "${1:-}" = --print-source ]; then
    trap - ERR
    if select_hdf5_source "${2:-/etc/apt}"; then exit 0; else exit 1; fi
fi
PARALLEL=${H5_PARALLEL:-0}
if [ "${1:-}" = --parallel ]; then
    PARALLEL=1
    shift
fi

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
PATCH_DIR=$REPO_ROOT/tests/hdf5-suite   # every *.patch there is applied (sorted), `patch -p1`
PAR_PATCH_DIR=$REPO_ROOT/tests/hdf5-parallel  # parallel build: these too, after those (the folder is optional)

PREFIX_ROOT=${1:-$REPO_ROOT/build/deps}
mkdir -p "$PREFIX_ROOT"
PREFIX_ROOT=$(cd "$PREFIX_ROOT" && pwd)

# The parallel build has its own source tree (its patches never touch the
# serial build's) and its own install and build trees.
VARIANT=""
[ "$PARALLEL" = 1 ] && VARIANT=-parallel
INSTALL_DIR=$PREFIX_ROOT/hdf5-$HDF5_VERSION$VARIANT
BUILD_DIR=$PREFIX_ROOT/hdf5-$HDF5_VERSION$VARIANT-build
SRC_DIR=$PREFIX_ROOT/hdf5-$HDF5_VERSION$VARIANT-src
APT_DIR=$PREFIX_ROOT/apt
DL_DIR=$PREFIX_ROOT/download
STAMP=$INSTALL_DIR/.h5gds-build-stamp

JOBS=${H5_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
BUILD_TYPE=${H5_BUILD_TYPE:-Release}

T0=$(date +%s)
log()  { printf '[build-hdf5 %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
die()  { printf '[build-hdf5] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; printf "[build-hdf5] ERROR: failed (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

# Run a long step quietly; on failure show the tail of its log.
run_logged() {
    local logf=$1; shift
    if ! "$@" >"$logf" 2>&1; then
        printf '[build-hdf5] ERROR: command failed: %s\n' "$*" >&2
        printf '[build-hdf5] ---- last 40 lines of %s ----\n' "$logf" >&2
        tail -n 40 "$logf" >&2
        trap - ERR
        exit 1
    fi
}

# What the stamp records: anything that should trigger a rebuild when changed.
patches_in() { if compgen -G "$1/*.patch" >/dev/null; then ls "$1"/*.patch | LC_ALL=C sort; fi; }
patch_files() {
    patches_in "$PATCH_DIR"
    if [ "$PARALLEL" = 1 ]; then patches_in "$PAR_PATCH_DIR"; fi
}
patch_sum() {
    local files; files=$(patch_files)
    if [ -n "$files" ]; then
        # names and contents of all patches, in order
        (for f in $files; do basename "$f"; cat "$f"; done) | sha256sum | cut -c1-16
    else
        echo none
    fi
}
STAMP_CONTENT="hdf5=$HDF5_VERSION patch=$(patch_sum) type=$BUILD_TYPE recipe=2"
MPI_CC=""
if [ "$PARALLEL" = 1 ]; then
    MPI_CC=${H5_MPI_CC:-}
    STAMP_CONTENT="$STAMP_CONTENT parallel mpicc=${MPI_CC:-distribution} targets=${H5_BUILD_TARGETS:-all}"
fi

# ---------------------------------------------------------------- 0. done?
if [ "${H5_FORCE:-0}" != 1 ] && [ -f "$INSTALL_DIR/lib/libhdf5.so" ] && [ -f "$STAMP" ] \
   && [ "$(cat "$STAMP")" = "$STAMP_CONTENT" ]; then
    log "HDF5 $HDF5_VERSION already built: $INSTALL_DIR (build tree $BUILD_DIR)"
    exit 0
fi
if [ -f "$STAMP" ]; then
    log "stamp differs from the wanted build ($STAMP_CONTENT): rebuilding"
fi

# ---------------------------------------------------------------- 1. apt packages
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (apt-get install / apt-get source); missing: $*"; }

APT_UPDATED=0
ensure_pkgs() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    need_root "${missing[*]}"
    if [ $APT_UPDATED = 0 ]; then
        log "apt-get update (system sources, to install: ${missing[*]})"
        run_logged "$PREFIX_ROOT/apt-system-update.log" apt-get update
        APT_UPDATED=1
    fi
    log "installing: ${missing[*]}"
    run_logged "$PREFIX_ROOT/apt-system-install.log" \
        env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}
ensure_pkgs cmake ninja-build gcc libc6-dev dpkg-dev patch xz-utils zlib1g-dev debian-archive-keyring
if [ "$PARALLEL" = 1 ] && [ -z "$MPI_CC" ]; then
    ensure_pkgs libopenmpi-dev openmpi-bin
fi
if [ "$PARALLEL" = 1 ]; then
    MPI_CC=$(command -v "${MPI_CC:-mpicc}") || die "MPI C compiler wrapper ${MPI_CC:-mpicc} not found"
    log "parallel build with MPI from $MPI_CC ($("$MPI_CC" --showme:version 2>/dev/null || "$MPI_CC" -v 2>&1 | head -n1))"
fi

# ---------------------------------------------------------------- 2. source
fetch_source() {
    local dsc uri
    dsc=$(ls "$DL_DIR"/hdf5_"$HDF5_VERSION"*.dsc 2>/dev/null | head -n1 || true)
    if [ -n "$dsc" ] && ls "$DL_DIR"/hdf5_"$HDF5_VERSION"*.orig.tar.* >/dev/null 2>&1; then
        log "source package already downloaded: $(basename "$dsc")"
        return 0
    fi
    need_root "apt-get source"
    local selected suite keyring why
    selected=$(select_hdf5_source /etc/apt) || die "cannot choose where HDF5's source comes from (see above)"
    read -r uri suite keyring why <<<"$selected"
    [ -f "$keyring" ] || die "archive keyring $keyring not found"
    log "private apt: deb-src $uri $suite main ($why)"

    mkdir -p "$APT_DIR"/{etc/apt.conf.d,etc/preferences.d,etc/trusted.gpg.d,lists/partial,cache/archives/partial,state}
    printf 'deb-src [signed-by=%s] %s %s main\n' "$keyring" "$uri" "$suite" >"$APT_DIR/etc/sources.list"
    # apt's sandbox user must be able to write into the private dirs
    chown -R _apt:root "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" 2>/dev/null || true

    APT_OPTS=(
        -o "Dir::Etc::sourcelist=$APT_DIR/etc/sources.list"
        -o "Dir::Etc::sourceparts=-"
        -o "Dir::Etc::preferences=$APT_DIR/etc/preferences"
        -o "Dir::Etc::preferencesparts=$APT_DIR/etc/preferences.d"
        -o "Dir::State=$APT_DIR/state"
        -o "Dir::State::Lists=$APT_DIR/lists"
        -o "Dir::State::status=/var/lib/dpkg/status"
        -o "Dir::Cache=$APT_DIR/cache"
        -o "Dir::Cache::archives=$APT_DIR/cache/archives"
        -o "Dir::Cache::pkgcache=$APT_DIR/cache/pkgcache.bin"
        -o "Dir::Cache::srcpkgcache=$APT_DIR/cache/srcpkgcache.bin"
        -o "APT::Sandbox::User=root"
        -o "Acquire::Languages=none"
    )
    log "apt-get update (private lists, $DEBIAN_SUITE sources only)"
    run_logged "$APT_DIR/update.log" apt-get "${APT_OPTS[@]}" update
    mkdir -p "$DL_DIR"
    log "apt-get source --download-only hdf5/$DEBIAN_SUITE (into $DL_DIR)"
    # "hdf5=<version>" would need the exact Debian revision; ask for the
    # suite's hdf5 and check the version below.
    (cd "$DL_DIR" && run_logged "$APT_DIR/source.log" apt-get "${APT_OPTS[@]}" source --download-only "hdf5/$DEBIAN_SUITE")
    dsc=$(ls "$DL_DIR"/hdf5_*.dsc 2>/dev/null | head -n1 || true)
    [ -n "$dsc" ] || die "apt-get source did not produce a .dsc (see $APT_DIR/source.log)"
    case "$(basename "$dsc")" in
        hdf5_"$HDF5_VERSION"[+-]*) ;;
        *) die "Debian $DEBIAN_SUITE's hdf5 source is $(basename "$dsc"), not $HDF5_VERSION" ;;
    esac
}

unpack_source() {
    local dsc tmp
    dsc=$(ls "$DL_DIR"/hdf5_"$HDF5_VERSION"*.dsc | head -n1)
    tmp=$PREFIX_ROOT/.hdf5-src-tmp
    rm -rf "$tmp"
    log "unpacking $(basename "$dsc") (upstream source, Debian patches not applied)"
    # --skip-patches: the upstream tree; debian/patches only touch autotools,
    # Fortran, Java and packaging details that a CMake C build does not need.
    run_logged "$PREFIX_ROOT/unpack.log" dpkg-source --skip-patches -x "$dsc" "$tmp"
    # dpkg-source puts a copy of the .orig tarball next to the target dir: drop it
    rm -f "$PREFIX_ROOT"/hdf5_*.orig.tar.*
    rm -rf "$SRC_DIR"
    mv "$tmp" "$SRC_DIR"
}

check_version() {
    local h=$SRC_DIR/src/H5public.h maj min rel
    [ -f "$h" ] || die "$h missing: source tree incomplete"
    maj=$(awk '$1=="#define" && $2=="H5_VERS_MAJOR"{print $3}' "$h")
    min=$(awk '$1=="#define" && $2=="H5_VERS_MINOR"{print $3}' "$h")
    rel=$(awk '$1=="#define" && $2=="H5_VERS_RELEASE"{print $3}' "$h")
    [ "$maj.$min.$rel" = "$HDF5_VERSION" ] || die "unpacked source is HDF5 $maj.$min.$rel, expected $HDF5_VERSION"
}

apply_patch() {
    local mark=$SRC_DIR/.h5gds-patch want
    want=$(patch_sum)
    [ -f "$mark" ] && [ "$(cat "$mark")" = "$want" ] && return 0
    if [ -f "$mark" ]; then
        # a different version of the patch was applied before: start from clean source
        log "patch changed since last build: re-unpacking source"
        unpack_source
        check_version
    fi
    local f
    for f in $(patch_files); do
        if patch -d "$SRC_DIR" -p1 -R --dry-run -s -f <"$f" >/dev/null 2>&1; then
            log "patch $(basename "$f"): already applied"
        else
            log "applying $(basename "$f")"
            patch -d "$SRC_DIR" -p1 -N -s --no-backup-if-mismatch <"$f" || die "could not apply $f"
        fi
    done
    echo "$want" >"$mark"
}

fetch_source
if [ ! -f "$SRC_DIR/CMakeLists.txt" ]; then
    unpack_source
fi
check_version
log "source OK: HDF5 $HDF5_VERSION in $SRC_DIR"
apply_patch

# ---------------------------------------------------------------- 3. configure, build, install
CMAKE_ARGS=(
    -G Ninja
    -S "$SRC_DIR" -B "$BUILD_DIR"
    -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
    -DCMAKE_INSTALL_PREFIX="$INSTALL_DIR"
    -DBUILD_SHARED_LIBS=ON
    -DBUILD_STATIC_LIBS=OFF
    -DONLY_SHARED_LIBS=ON
    -DBUILD_TESTING=ON
    -DHDF5_BUILD_TOOLS=ON
    -DHDF5_BUILD_UTILS=ON
    -DHDF5_BUILD_HL_LIB=ON
    -DHDF5_BUILD_HL_TOOLS=ON
    -DHDF5_BUILD_FORTRAN=OFF
    -DHDF5_BUILD_CPP_LIB=OFF
    -DHDF5_BUILD_JAVA=OFF
    -DHDF5_BUILD_EXAMPLES=OFF
    -DHDF5_BUILD_DOC=OFF
    -DHDF5_ENABLE_PARALLEL=$( [ "$PARALLEL" = 1 ] && echo ON || echo OFF )
    -DHDF5_ENABLE_THREADSAFE=OFF
    -DHDF5_ENABLE_SZIP_SUPPORT=OFF
    -DHDF5_ENABLE_PLUGIN_SUPPORT=OFF
    -DHDF5_ALLOW_EXTERNAL_SUPPORT=NO
    -DHDF5_TEST_VFD=OFF
    -DHDF5_TEST_PARALLEL=$( [ "$PARALLEL" = 1 ] && echo ON || echo OFF )
    -DHDF5_TEST_FORTRAN=OFF
    -DHDF5_TEST_CPP=OFF
    -DHDF5_TEST_JAVA=OFF
    -DHDF5_TEST_EXAMPLES=OFF
    -DHDF5_ENABLE_Z_LIB_SUPPORT=ON
    -DHDF5_ENABLE_DIRECT_VFD=ON
)
if [ "$PARALLEL" = 1 ]; then
    # The MPI compiler wrapper is the C compiler: HDF5's test programs and
    # h5gds then see the same MPI. Subfiling needs MPI_THREAD_MULTIPLE and is
    # not what is tested here.
    CMAKE_ARGS+=(-DCMAKE_C_COMPILER="$MPI_CC" -DMPI_C_COMPILER="$MPI_CC" -DHDF5_ENABLE_SUBFILING_VFD=OFF)
fi

# A build tree from an older recipe is configured again (options may differ).
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ ! -f "$BUILD_DIR/CMakeCache.txt" ] \
   || [ "$(cat "$BUILD_DIR/.h5gds-recipe" 2>/dev/null)" != "$STAMP_CONTENT" ]; then
    log "configuring (CMake + Ninja, $BUILD_TYPE, shared, tools+tests+HL, zlib) -> $BUILD_DIR"
    mkdir -p "$BUILD_DIR"
    run_logged "$BUILD_DIR/h5gds-configure.log" cmake "${CMAKE_ARGS[@]}"
    echo "$STAMP_CONTENT" >"$BUILD_DIR/.h5gds-recipe"
else
    log "build tree exists, reusing it: $BUILD_DIR"
fi
if grep -q '^#define H5_HAVE_FILTER_DEFLATE 1' "$BUILD_DIR/src/H5pubconf.h" 2>/dev/null; then
    log "zlib (deflate) filter: enabled"
else
    log "zlib (deflate) filter: NOT enabled (zlib not found)"
fi

if [ "$PARALLEL" = 1 ] && [ -n "${H5_BUILD_TARGETS:-}" ]; then
    # shellcheck disable=SC2086 # a list of targets
    log "building targets $H5_BUILD_TARGETS with $JOBS jobs (log: $BUILD_DIR/h5gds-build.log)"
    run_logged "$BUILD_DIR/h5gds-build.log" cmake --build "$BUILD_DIR" -j "$JOBS" --target $H5_BUILD_TARGETS
    log "installing libraries, headers and the CMake config into $INSTALL_DIR"
    for comp in libraries headers configinstall; do
        run_logged "$BUILD_DIR/h5gds-install-$comp.log" cmake --install "$BUILD_DIR" --component "$comp"
    done
else
    log "building with $JOBS jobs (log: $BUILD_DIR/h5gds-build.log)"
    run_logged "$BUILD_DIR/h5gds-build.log" cmake --build "$BUILD_DIR" -j "$JOBS"

    log "installing into $INSTALL_DIR"
    run_logged "$BUILD_DIR/h5gds-install.log" cmake --install "$BUILD_DIR"
fi

[ -f "$INSTALL_DIR/lib/libhdf5.so" ] || die "install finished but $INSTALL_DIR/lib/libhdf5.so is missing"
if [ -z "${H5_BUILD_TARGETS:-}" ]; then
    "$BUILD_DIR/bin/h5dump" --version >/dev/null 2>&1 || log "warning: $BUILD_DIR/bin/h5dump --version failed"
fi
if [ "$PARALLEL" = 1 ]; then
    grep -q '^#define H5_HAVE_PARALLEL 1' "$INSTALL_DIR/include/H5pubconf.h" \
        || die "$INSTALL_DIR/include/H5pubconf.h does not say H5_HAVE_PARALLEL: not a parallel build"
fi

echo "$STAMP_CONTENT" >"$STAMP"
log "done: HDF5 $HDF5_VERSION installed in $INSTALL_DIR; build tree (test programs) in $BUILD_DIR"
