#!/usr/bin/env bash
# Run HDF5 1.14.5's own test programs with HDF5_DRIVER set to a VFD: an
# external VFD plugin (default: gds) or a built-in one (sec2, for comparison).
# This is what HDF5's CMake "VFD-<vfd>-<test>" tests do (test/CMakeVFDTests.cmake,
# config/cmake/vfdTest.cmake), minus CTest.
#
# Usage:
#   tests/hdf5-suite/run-hdf5-tests.sh [options] [BUILD_TREE [PLUGIN_DIR [DRIVER [DRIVER_CONFIG]]]]
#
#   BUILD_TREE     HDF5 1.14.5 build tree made by scripts/build-hdf5.sh
#                  (default: <repo>/build/deps/hdf5-1.14.5-build)
#   PLUGIN_DIR     directory holding the VFD plugin, put in HDF5_PLUGIN_PATH
#                  (default: <repo>/build/h14/src)
#   DRIVER         value of HDF5_DRIVER (default: gds); `sec2` for the baseline
#   DRIVER_CONFIG  value of HDF5_DRIVER_CONFIG (default: unset)
#
# Options (override the positionals):
#   -b DIR   build tree          -p DIR  plugin dir       -d NAME  driver
#   -c STR   driver config       -j N    parallel tests (default: nproc)
#   -t SECS  default per-test timeout (default: 300; some tests have their own)
#   -w DIR   work dir (default: <repo>/build/hdf5-suite/<driver>); wiped first
#   -x FILE  exclusion list (default: tests/hdf5-suite/excluded.txt)
#   -o LIST  run only these tests (space/comma separated)
#   -e N     HDF5TestExpress level, 0 (exhaustive) .. 3 (quickest; HDF5's default)
#   -k       keep work dirs of passing tests (failing ones are always kept)
#   -q       quiet: do not print the tail of a failing test's log
#   -l       list the tests and exit
#
# Output: one line per test, `PASS|FAIL|SKIP  name  ...`, then the summary line
# `N passed, M failed, K skipped`.  Exit status 1 if any test failed, 2 on a
# usage/setup error.  Each test's full output is in <work>/logs/<test>.log.
set -uo pipefail
if [ "${BASH_VERSINFO[0]}" -lt 5 ] || { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; then
    echo "run-hdf5-tests: ERROR: needs bash >= 5.1 (wait -n -p)" >&2; exit 2
fi

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

BUILD_TREE=""; PLUGIN_DIR=""; DRIVER=""; DRIVER_CONFIG=""; DRIVER_CONFIG_SET=0
JOBS=$(nproc 2>/dev/null || echo 2)
DEF_TIMEOUT=300
WORK=""
EXCLUDE_FILE=$SCRIPT_DIR/excluded.txt
ONLY=""
KEEP=0; QUIET=0; LIST_ONLY=0; EXPRESS=""

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
die()   { echo "run-hdf5-tests: ERROR: $*" >&2; exit 2; }

while getopts ":b:p:d:c:j:t:w:x:o:e:kqlh" opt; do
    case $opt in
        b) BUILD_TREE=$OPTARG ;;
        p) PLUGIN_DIR=$OPTARG ;;
        d) DRIVER=$OPTARG ;;
        c) DRIVER_CONFIG=$OPTARG; DRIVER_CONFIG_SET=1 ;;
        j) JOBS=$OPTARG ;;
        t) DEF_TIMEOUT=$OPTARG ;;
        w) WORK=$OPTARG ;;
        x) EXCLUDE_FILE=$OPTARG ;;
        o) ONLY=${OPTARG//,/ } ;;
        e) EXPRESS=$OPTARG ;;
        k) KEEP=1 ;;
        q) QUIET=1 ;;
        l) LIST_ONLY=1 ;;
        h) usage ;;
        :) die "option -$OPTARG needs a value" ;;
        *) die "unknown option -$OPTARG (see -h)" ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] && [ -z "$BUILD_TREE" ] && BUILD_TREE=$1
[ $# -ge 2 ] && [ -z "$PLUGIN_DIR" ] && PLUGIN_DIR=$2
[ $# -ge 3 ] && [ -z "$DRIVER" ] && DRIVER=$3
[ $# -ge 4 ] && [ $DRIVER_CONFIG_SET = 0 ] && { DRIVER_CONFIG=$4; DRIVER_CONFIG_SET=1; }
[ $# -gt 4 ] && die "too many arguments (see -h)"

BUILD_TREE=${BUILD_TREE:-$REPO_ROOT/build/deps/hdf5-1.14.5-build}
PLUGIN_DIR=${PLUGIN_DIR:-$REPO_ROOT/build/h14/src}
DRIVER=${DRIVER:-gds}
WORK=${WORK:-$REPO_ROOT/build/hdf5-suite/$DRIVER}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "-j needs a positive number"
[[ $DEF_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "-t needs a positive number of seconds"

# ---------------------------------------------------------------------------
# The tests.  Core: HDF5 1.14.5 test/CMakeLists.txt H5_EXPRESS_TESTS + H5_TESTS,
# less H5_VFD_SKIP_TESTS of test/CMakeVFDTests.cmake (as its ADD_VFD_TEST does
# on Linux, where `big` and `cache` are put back), plus fheap
# (HDF5_TEST_FHEAP_VFD=ON).  Extra: accum (metadata accumulator; CMake leaves
# it out of its VFD runs, but it passes under a single-file VFD),
# filenotclosed, del_many_dense_attrs, and the HL library's tests
# (hl/test/CMakeTests.cmake), which use the default FAPL, i.e. HDF5_DRIVER.
# Order: longest first, so that the parallel run ends sooner.  flush2 reads
# what flush1 wrote: they run in sequence, in one dir.
ALL_TESTS=(
    set_extent dsets testhdf5 objcopy cmpd_dset fheap vds links earray
    istore mdset cache gheap fillval unlink dt_arith hyperslab
    btree2 farray cache_api objcopy_ref cache_tagging lheap ohdr stab
    evict_on_close bittests page_buffer dtypes select_io_dset
    chunk_info filter_fail extend direct_chunk external efc
    twriteorder big mtime mount flush1 flush2 app_ref enum
    ttsafe enc_dec_plist enc_dec_plist_cross_platform getname
    s3comms ntypes dangle dtransform cross_read freespace mf file_image
    unregister cache_logging cork swmr thread_id vol timer cmpd_dtransform
    event_set onion
    accum filenotclosed del_many_dense_attrs
    hl_test_lite hl_test_image hl_test_file_image hl_test_table hl_test_ds
    hl_test_packet hl_test_ld hl_test_dset_append hl_test_h5do_compat
)
# Per-test timeouts (seconds) for the long ones (CTest gives them
# CTEST_VERY_LONG_TIMEOUT); all others get -t.
declare -A TIMEOUT_OF=( [cache]=900 [fheap]=900 [btree2]=600 [objcopy]=600 [istore]=600 [big]=600 )
# Helper programs a test runs from its working directory.
declare -A HELPERS_OF=( [accum]="accum_swmr_reader" )

if [ $LIST_ONLY = 1 ]; then printf '%s\n' "${ALL_TESTS[@]}"; exit 0; fi

# ---------------------------------------------------------------------------
[ -d "$BUILD_TREE" ] || die "HDF5 build tree not found: $BUILD_TREE (run scripts/build-hdf5.sh)"
BUILD_TREE=$(cd "$BUILD_TREE" && pwd)
BIN=$BUILD_TREE/bin
TESTDATA=$BUILD_TREE/test/H5TEST/testfiles     # what CMake copies for test/
HL_TESTDATA=$BUILD_TREE/hl/test/testfiles       # ... and for hl/test/
[ -x "$BIN/dsets" ] || die "$BIN/dsets missing: $BUILD_TREE is not an HDF5 build tree with tests (BUILD_TESTING=ON)"
[ -d "$TESTDATA" ] || die "$TESTDATA missing (the build copies it; was the build complete?)"
command -v timeout >/dev/null || die "coreutils 'timeout' is required"

if [ -d "$PLUGIN_DIR" ]; then PLUGIN_DIR=$(cd "$PLUGIN_DIR" && pwd); fi
case $DRIVER in
    sec2|stdio|core|core_paged|split|multi|family|log|splitter) BUILTIN=1 ;;
    *) BUILTIN=0 ;;
esac
if [ $BUILTIN = 0 ] && [ ! -d "$PLUGIN_DIR" ]; then
    die "plugin dir not found: $PLUGIN_DIR (driver '$DRIVER' is not built into HDF5)"
fi

# Exclusions: `testname  # reason`
declare -A EXCLUDED=()
if [ -f "$EXCLUDE_FILE" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
        name=${line%%#*}; name=${name//[[:space:]]/}
        [ -z "$name" ] && continue
        reason=""; [[ $line == *#* ]] && reason=${line#*#}
        reason=$(echo "$reason" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
        EXCLUDED[$name]=${reason:-excluded}
    done <"$EXCLUDE_FILE"
elif [ "$EXCLUDE_FILE" != "$SCRIPT_DIR/excluded.txt" ]; then
    die "exclusion list not found: $EXCLUDE_FILE"
fi

if [ -n "$ONLY" ]; then
    declare -A KNOWN=(); for t in "${ALL_TESTS[@]}"; do KNOWN[$t]=1; done
    SEL=()
    for t in $ONLY; do
        if [ -n "${KNOWN[$t]:-}" ] || [ -x "$BIN/$t" ]; then SEL+=("$t"); else die "unknown test '$t' (see -l)"; fi
    done
else
    SEL=("${ALL_TESTS[@]}")
fi

# ---------------------------------------------------------------------------
# Environment of every test (what vfdTest.cmake + the CTest properties set).
export HDF5_DRIVER=$DRIVER
# The gds driver has vector I/O callbacks: select_io_dset's expectations of
# the I/O mode are adjusted for it (select_io_dset-vector-io.patch).
if [ "$DRIVER" = gds ]; then export HDF5_TEST_VFD_VECTOR_IO=1; else unset HDF5_TEST_VFD_VECTOR_IO; fi
if [ $DRIVER_CONFIG_SET = 1 ]; then export HDF5_DRIVER_CONFIG=$DRIVER_CONFIG; else unset HDF5_DRIVER_CONFIG; fi
unset HDF5_TEST_DRIVER HDF5_NOCLEANUP HDF5_PREFIX HDF5_VOL_CONNECTOR HDF5_LIBVER_BOUNDS HDF5_USE_FILE_LOCKING
if [ -d "$PLUGIN_DIR" ]; then export HDF5_PLUGIN_PATH=$PLUGIN_DIR; fi
if [ -n "$EXPRESS" ]; then export HDF5TestExpress=$EXPRESS; fi
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

declare -A PID_UNIT=()
PASSED=0; FAILED=0; SKIPPED=0; FAILED_NAMES=()
on_signal() {   # stop the tests this script started (timeout forwards TERM to its test)
    local p
    for p in "${!PID_UNIT[@]}"; do pkill -TERM -P "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
    echo "hdf5-suite: interrupted"
    echo "$PASSED passed, $((FAILED + ${#PID_UNIT[@]})) failed, $SKIPPED skipped"
    exit 130
}
trap on_signal INT TERM

rm -rf "$WORK"
mkdir -p "$WORK/logs" "$WORK/run" || die "cannot create $WORK"
WORK=$(cd "$WORK" && pwd)

echo "hdf5-suite: driver=$DRIVER${HDF5_DRIVER_CONFIG+ config='$HDF5_DRIVER_CONFIG'} plugin_path=${HDF5_PLUGIN_PATH:-<unset>} jobs=$JOBS express=${HDF5TestExpress:-default}"
echo "hdf5-suite: build=$BUILD_TREE work=$WORK"

# Pre-flight: can the library load the driver at all?  (Otherwise every test
# fails the same way, at H5open.)  Needs a C compiler; skipped without one.
preflight() {
    local src_dir inc cc=${CC:-cc}
    command -v "$cc" >/dev/null 2>&1 || { echo "hdf5-suite: (no C compiler: pre-flight check skipped)"; return 0; }
    src_dir=$(sed -n 's/^HDF5_SOURCE_DIR:STATIC=//p' "$BUILD_TREE/CMakeCache.txt" 2>/dev/null)
    [ -f "$src_dir/src/hdf5.h" ] || { echo "hdf5-suite: (HDF5 source not found: pre-flight check skipped)"; return 0; }
    cat >"$WORK/preflight.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "hdf5.h"
int main(void)
{
    const char *name = getenv("HDF5_DRIVER");
    char        cfg[1024] = "";
    unsigned long feat = 0;
    hid_t       drv;
    ssize_t     n;
    htri_t      reg;
    if (H5open() < 0) { fprintf(stderr, "H5open failed: the library could not set up HDF5_DRIVER=%s\n", name); return 1; }
    drv = H5Pget_driver(H5P_FILE_ACCESS_DEFAULT);
    reg = H5FDis_driver_registered_by_name(name);
    n   = H5Pget_driver_config_str(H5P_FILE_ACCESS_DEFAULT, cfg, sizeof cfg);
    if (drv < 0 || reg <= 0) { fprintf(stderr, "driver '%s' is not registered after H5open\n", name); return 1; }
    if (H5FDdriver_query(drv, &feat) < 0) { fprintf(stderr, "H5FDdriver_query failed\n"); return 1; }
    printf("hdf5-suite: pre-flight OK: default FAPL driver id=%lld registered=%d feature_flags=0x%lx "
           "(DEFAULT_VFD_COMPATIBLE=%s) config_str=%s%s%s\n",
           (long long)drv, (int)reg, feat, (feat & H5FD_FEAT_DEFAULT_VFD_COMPATIBLE) ? "yes" : "no",
           n > 0 ? "'" : "", n > 0 ? cfg : "<none>", n > 0 ? "'" : "");
    return 0;
}
EOF
    if ! "$cc" -o "$WORK/preflight" "$WORK/preflight.c" -I"$src_dir/src" -I"$src_dir/src/H5FDsubfiling" -I"$BUILD_TREE/src" \
         -L"$BIN" -lhdf5 -Wl,-rpath,"$BIN" >"$WORK/preflight.build.log" 2>&1; then
        echo "hdf5-suite: (pre-flight program did not compile, skipped; see $WORK/preflight.build.log)"
        return 0
    fi
    if ! (cd "$WORK" && timeout 60 ./preflight) >"$WORK/preflight.log" 2>&1; then
        echo "hdf5-suite: ERROR: HDF5 cannot load driver '$DRIVER' (HDF5_PLUGIN_PATH=${HDF5_PLUGIN_PATH:-<unset>}):"
        awk '{print "    " $0}' "$WORK/preflight.log" | head -n 40
        return 1
    fi
    cat "$WORK/preflight.log"
}
preflight || { echo "0 passed, ${#SEL[@]} failed, 0 skipped"; exit 1; }

# ---------------------------------------------------------------------------
# Units of work: normally one test; flush1+flush2 share one dir, in sequence.
UNITS=()
declare -A IN_SEL=(); for t in "${SEL[@]}"; do IN_SEL[$t]=1; done
for t in "${SEL[@]}"; do
    if [ -n "${EXCLUDED[$t]:-}" ]; then
        printf 'SKIP  %-30s # %s\n' "$t" "${EXCLUDED[$t]}"; SKIPPED=$((SKIPPED + 1)); continue
    fi
    if [ ! -x "$BIN/$t" ]; then
        printf 'SKIP  %-30s # not built in %s\n' "$t" "$BIN"; SKIPPED=$((SKIPPED + 1)); continue
    fi
    case $t in
        flush2) [ -n "${IN_SEL[flush1]:-}" ] && [ -z "${EXCLUDED[flush1]:-}" ] && continue ;;  # runs after flush1
        flush1) if [ -n "${IN_SEL[flush2]:-}" ] && [ -z "${EXCLUDED[flush2]:-}" ]; then UNITS+=("flush1 flush2"); continue; fi ;;
    esac
    UNITS+=("$t")
done

# Run one unit in its own directory (a copy of the test data, as the CMake
# VFD tests have in build/test/<vfd>/); `srcdir` points there.
run_unit() {
    local unit=$1 dir t rc start end to
    dir=$WORK/run/${unit%% *}
    mkdir -p "$dir"
    case $unit in
        hl_*) [ -d "$HL_TESTDATA" ] && cp -R "$HL_TESTDATA" "$dir/testfiles" ;;
        *)    cp -R "$TESTDATA" "$dir/testfiles" ;;
    esac
    for t in ${HELPERS_OF[$unit]:-}; do ln -sf "$BIN/$t" "$dir/$t"; done
    for t in $unit; do
        to=${TIMEOUT_OF[$t]:-$DEF_TIMEOUT}
        start=$(date +%s.%N)
        ( cd "$dir" && export srcdir=$dir && exec timeout -k 10 "$to" "$BIN/$t" ) </dev/null >"$WORK/logs/$t.log" 2>&1
        rc=$?
        end=$(date +%s.%N)
        echo "$rc $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') $to" >"$WORK/logs/$t.result"
        [ $rc = 0 ] || break   # flush2 makes no sense after a failed flush1
    done
}

report() {  # report the tests of a finished unit
    local unit=$1 t rc secs to nskip extra dir
    dir=$WORK/run/${unit%% *}
    local unit_ok=1
    for t in $unit; do
        if [ ! -f "$WORK/logs/$t.result" ]; then
            printf 'FAIL  %-30s (not run: %s failed before it)\n' "$t" "${unit%% *}"
            FAILED=$((FAILED + 1)); FAILED_NAMES+=("$t"); unit_ok=0; continue
        fi
        read -r rc secs to <"$WORK/logs/$t.result"
        nskip=$(grep -c -E -- '-SKIP-|SKIPPED' "$WORK/logs/$t.log" 2>/dev/null); nskip=${nskip:-0}
        extra=""; [ "$nskip" -gt 0 ] && extra=", $nskip skip notes"
        if [ "$rc" = 0 ]; then
            printf 'PASS  %-30s (%ss%s)\n' "$t" "$secs" "$extra"; PASSED=$((PASSED + 1))
        else
            unit_ok=0
            case $rc in
                124|137) printf 'FAIL  %-30s (timeout after %ss; log: %s)\n' "$t" "$to" "$WORK/logs/$t.log" ;;
                *)       if [ "$rc" -gt 128 ]; then
                             printf 'FAIL  %-30s (killed by signal %s after %ss; log: %s)\n' "$t" $((rc - 128)) "$secs" "$WORK/logs/$t.log"
                         else
                             printf 'FAIL  %-30s (exit %s after %ss; log: %s)\n' "$t" "$rc" "$secs" "$WORK/logs/$t.log"
                         fi ;;
            esac
            if [ $QUIET = 0 ]; then
                grep -v -E '^ *(Testing|TESTING|Test|Tests|  ) .*(PASSED| -SKIP-|SKIPPED)$' "$WORK/logs/$t.log" \
                    | grep -n -i -E 'fail|error|abort|assert|\*FAILED\*|segm|signal|#[0-9]{3}' | head -n 25 | awk '{print "      | " $0}'
                echo "      | ... last lines:"; tail -n 8 "$WORK/logs/$t.log" | awk '{print "      | " $0}'
            fi
            FAILED=$((FAILED + 1)); FAILED_NAMES+=("$t")
        fi
    done
    if [ $unit_ok = 1 ] && [ $KEEP = 0 ]; then rm -rf "$dir"; fi
}

T_START=$(date +%s)
next=0
while [ $next -lt ${#UNITS[@]} ] || [ ${#PID_UNIT[@]} -gt 0 ]; do
    while [ $next -lt ${#UNITS[@]} ] && [ ${#PID_UNIT[@]} -lt "$JOBS" ]; do
        run_unit "${UNITS[$next]}" &
        PID_UNIT[$!]=${UNITS[$next]}
        next=$((next + 1))
    done
    done_pid=""
    wait -n -p done_pid "${!PID_UNIT[@]}" 2>/dev/null
    if [ -z "$done_pid" ]; then   # should not happen; reap whatever finished
        for p in "${!PID_UNIT[@]}"; do
            kill -0 "$p" 2>/dev/null || { report "${PID_UNIT[$p]}"; unset "PID_UNIT[$p]"; }
        done
        sleep 0.2; continue
    fi
    report "${PID_UNIT[$done_pid]}"
    unset "PID_UNIT[$done_pid]"
done

echo "hdf5-suite: driver=$DRIVER wall time $(( $(date +%s) - T_START ))s${FAILED_NAMES[*]:+; failed: ${FAILED_NAMES[*]}}"
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ $FAILED = 0 ]
