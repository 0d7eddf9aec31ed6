#!/usr/bin/env bash
# Tests of h5gds-bench itself (CPU only): a wrong argument gets one line
# saying what is wrong and exit status 2, sizes are those of the driver's
# configuration, the CSV has the documented schema, --filter writes
# compressed datasets through HDF5's CPU filters, verification catches a
# corrupted byte, and failures (unwritable directory, full disk) give a
# clear error and leave no files behind. The other CLIs of tools/ (the C
# ones built beside BENCH, the Python scripts) get the same argument checks.
#   usage: test_bench.sh BENCH WORKDIR
set -uo pipefail
bench=$(readlink -f "$1") work=$2
tools_bin=$(cd "$(dirname "$bench")" && pwd)
tools_src=$(cd "$(dirname "$0")/../tools" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f out.txt ] && sed 's/^/    /' out.txt | tail -8; }
expect_rc() { # rc description command...
  local want=$1 what=$2; shift 2
  "$@" >out.txt 2>&1; local rc=$?
  [ "$rc" -eq "$want" ] && ok "$what (exit $rc)" || bad "$what: exit $rc, expected $want"
}
leftovers() { find "$1" -mindepth 1 -name 'h5gds-bench.*' | wc -l; }

# A wrong argument: exit 2 and one line that names the problem (no usage
# block, no error stack, no traceback).   wrong_arg "text in the line" CMD...
wrong_arg() {
  local want=$1; shift
  "$@" >out.txt 2>&1; local rc=$?
  local what="${*##*/}"
  if [ "$rc" -ne 2 ]; then bad "$what: exit $rc, expected 2"
  elif [ "$(wc -l < out.txt)" -ne 1 ]; then bad "$what: $(wc -l < out.txt) lines, expected 1"
  elif ! grep -qF -- "$want" out.txt; then bad "$what: no '$want' in the line"
  else ok "$what: one line, exit 2"; fi
}
bits="lowercase b, which can mean bits"
expect_rc 0 "--help" "$bench" --help
wrong_arg "unknown option '--bogus'" "$bench" --bogus
wrong_arg "'12XB': is not a size" "$bench" --sizes 12XB
wrong_arg "$bits" "$bench" --sizes 64Mb
# (small sizes: an argument let through would run a short benchmark, not a long one)
wrong_arg "'1.5KiB': is not a size" "$bench" --sizes 1.5KiB
wrong_arg "empty item" "$bench" --sizes 64KiB,
wrong_arg "'0': is 0 bytes" "$bench" --blocks 0
wrong_arg "$bits" "$bench" --chunk 8mb
wrong_arg "--repeat '0'" "$bench" --repeat 0
wrong_arg "needs a value" "$bench" --repeat
wrong_arg "unknown method 'FOO'" "$bench" --methods FOO
wrong_arg "--threads '0'" "$bench" --threads 0
wrong_arg "'threads' = 'many' is not a whole number" "$bench" --config threads=many
wrong_arg "$bits" "$bench" --config io_block_size=4Mb
wrong_arg "unexpected argument 'extra'" "$bench" extra

mkdir -p runs
expect_rc 0 "small run" "$bench" --sizes 1MiB,3MiB --repeat 2 --methods SEC2,GDS --memory host --dir runs --csv r.csv
header=$(head -1 r.csv)
want="method,phase,memory,size_bytes,threads,block_bytes,repeat,seconds,rate_GBps,gpu,cpus,filesystem,kernel,hdf5_version,driver_config,cold_cache,filter,ratio"
[ "$header" = "$want" ] && ok "CSV header" || bad "CSV header: $header"
# 2 sizes x 2 repeats x (3 ceiling rows + 2 methods x 3 phases)
rows=$(($(wc -l < r.csv) - 1))
[ "$rows" -eq $((2 * 2 * (3 + 2 * 3))) ] && ok "CSV rows ($rows)" || bad "CSV rows: $rows"
python3 - r.csv <<'PY' && ok "CSV values" || bad "CSV values"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
phases = {"write", "cold_read", "warm_read"}
assert all(len(r) == 18 and r["filter"] == "none" and r["ratio"] == "" for r in rows)
assert all(r["phase"] in phases and float(r["rate_GBps"]) > 0 and float(r["seconds"]) > 0 for r in rows)
assert {r["method"] for r in rows} == {"SEC2", "GDS", "CEIL-ODIRECT", "CEIL-PAGECACHE"}
assert {r["size_bytes"] for r in rows} == {str(1 << 20), str(3 << 20)}
assert all(r["memory"] == "host" for r in rows if r["method"] in ("SEC2", "GDS"))
assert all("mode=auto" in r["driver_config"] for r in rows if r["method"] == "GDS")
PY
[ "$(leftovers runs)" -eq 0 ] && ok "no files left after a run" || bad "files left after a run"

# --filter: compressed float32 datasets (host memory here: HDF5's CPU filters,
# route "host"); the data compresses as real data does (not random bytes, not
# zeros); every row names the filter and the file's ratio; the ceilings are
# unchanged (raw bytes, no filter).
wrong_arg "--filter needs --chunk SIZE" "$bench" --filter gzip --sizes 8MiB
wrong_arg "unknown filter 'gz'" "$bench" --chunk 1MiB --filter gz
wrong_arg "not a whole number of float32 elements" "$bench" --chunk 1001 --filter gzip
plugin_msg="filter lz4 (32004) is not available: set HDF5_PLUGIN_PATH to hdf5plugin's plugin folder"
wrong_arg "$plugin_msg" env HDF5_PLUGIN_PATH=/nonexistent "$bench" --chunk 1MiB --filter lz4 --sizes 8MiB \
  --memory host --repeat 1 --dir runs --csv nolz4.csv
[ ! -e nolz4.csv ] && [ "$(leftovers runs)" -eq 0 ] && ok "unavailable filter: no CSV, no files" \
  || bad "unavailable filter: a CSV or files left"
rm -rf kept && mkdir -p kept
expect_rc 0 "--filter gzip run" "$bench" --chunk 1MiB --filter gzip --sizes 8MiB --memory host --repeat 1 \
  --methods SEC2,GDS --dir kept --keep --csv z.csv
python3 - z.csv <<'PY' && ok "--filter gzip: filter, ratio and route in the CSV" || bad "--filter gzip: CSV"
import csv, sys
reader = csv.DictReader(open(sys.argv[1]))
assert reader.fieldnames[-2:] == ["filter", "ratio"], reader.fieldnames
rows = list(reader)
ceil = [r for r in rows if r["method"].startswith("CEIL")]
meth = [r for r in rows if not r["method"].startswith("CEIL")]
assert len(ceil) == 3 and len(meth) == 2 * 3, (len(ceil), len(meth))
assert all(r["filter"] == "none" and r["ratio"] == "" for r in ceil), ceil
for r in meth:
    assert r["filter"] == "gzip", r
    # gzip + shuffle of the rounded field: about 1.9; random bytes give <= 1, zeros hundreds
    assert 1.2 < float(r["ratio"]) < 10, r["ratio"]
    assert "chunk=1048576" in r["driver_config"] and "route=host" in r["driver_config"], r["driver_config"]
    assert int(r["size_bytes"]) == 8 << 20 and float(r["rate_GBps"]) > 0
for m in ("SEC2", "GDS"):  # the reads have their write's ratio
    assert len({r["ratio"] for r in meth if r["method"] == m}) == 1, m
PY
kept_file=$(find kept -name bench.h5 | head -1)
if command -v h5dump >/dev/null && [ -n "$kept_file" ]; then
  h5dump -p -H -d /data "$kept_file" >dump.txt 2>&1
  grep -q "H5T_IEEE_F32LE" dump.txt && grep -q "PREPROCESSING SHUFFLE" dump.txt && grep -q "DEFLATE { LEVEL 4 }" dump.txt \
    && ok "--filter gzip: a float32 dataset with shuffle + deflate 4" || bad "--filter gzip: the file's pipeline: $(grep -A3 FILTERS dump.txt | tr -s ' \n' ' ')"
elif [ -z "$kept_file" ]; then
  bad "--filter gzip: no file kept"
else
  echo "SKIP --filter gzip: the pipeline check needs h5dump, which is not installed here"
fi
rm -rf kept

# Decimal and binary units as the configuration takes them: 100KB is 100000 bytes.
expect_rc 0 "sizes in KB and K" "$bench" --sizes 100KB,4K --repeat 1 --methods GDS --memory host --no-ceilings \
  --dir runs --csv d.csv
[ "$(cut -d, -f4 d.csv | sort -u | tr '\n' ' ')" = "100000 4096 size_bytes " ] && ok "sizes 100KB and 4K in the CSV" \
  || bad "sizes 100KB and 4K in the CSV: $(cut -d, -f4 d.csv | sort -u | tr '\n' ' ')"

expect_rc 1 "a corrupted byte is caught" "$bench" --sizes 1MiB --repeat 1 --methods GDS --memory host --no-ceilings \
  --dir runs --csv c.csv --inject-corruption
grep -q "verification failed" out.txt && ok "corruption reported" || bad "corruption reported"
[ "$(leftovers runs)" -eq 0 ] && ok "no files left after the failure" || bad "files left after the failure"

expect_rc 1 "unwritable directory" "$bench" --sizes 1MiB --dir /proc --csv u.csv
grep -q "cannot create a directory in /proc" out.txt && ok "clear message for an unwritable directory" \
  || bad "clear message for an unwritable directory"

# A full disk, simulated with a file size limit (writes fail with EFBIG).
expect_rc 1 "full disk" bash -c "ulimit -f 4096; exec '$bench' --sizes 16MiB --repeat 1 --methods GDS --memory host \
  --no-ceilings --dir runs --csv f.csv"
grep -qi "disk full\|failed" out.txt && ok "clear message for a full disk" || bad "clear message for a full disk"
[ "$(leftovers runs)" -eq 0 ] && ok "no files left after a full disk" || bad "files left after a full disk"

# The other C tools, built beside h5gds-bench.
calls=$tools_bin/h5gds-calls engine=$tools_bin/h5gds-engine-bench
if [ -x "$calls" ] && [ -x "$engine" ]; then
  wrong_arg "$bits" "$calls" --sizes 4Kb
  wrong_arg "'4.5KiB': is not a size" "$calls" --sizes 4KiB,4.5KiB
  wrong_arg "--calls 'x'" "$calls" --calls x
  wrong_arg "needs a value" "$calls" --rounds
  wrong_arg "unknown argument '--bogus'" "$calls" --bogus
  expect_rc 0 "h5gds-calls with sizes 1KB and 4K" "$calls" --sizes 1KB,4K --calls 3 --rounds 1 --dir runs
  wrong_arg "$bits" "$engine" --size 2Gb
  wrong_arg "--repeat 'x'" "$engine" --repeat x
  wrong_arg "--kernel-ms 'nan'" "$engine" --kernel-ms nan
  wrong_arg "unknown argument '--bogus'" "$engine" --bogus 1
else
  bad "h5gds-calls and h5gds-engine-bench not built in $tools_bin"
fi

# The Python scripts of tools/ (no GPU needed for their argument checks).
py() { python3 "$tools_src/$1" "${@:2}"; }
wrong_arg "$bits" py bench_peers.py --csv p.csv --sizes 256Mb
wrong_arg "unknown peer 'nope'" py bench_peers.py --csv p.csv --peers nope
[ ! -e p.csv ] && ok "bench_peers: no CSV left by a wrong argument" || bad "bench_peers: a CSV left by a wrong argument"
wrong_arg "'1.5GiB' is not a size" py shared_file_model.py --size-per-rank 1.5GiB
wrong_arg "--ranks: '0'" py shared_file_model.py --ranks 0
wrong_arg "$bits" py autotune_summary.py r.csv --tuned 16x32Mb
wrong_arg "cannot read" py plot_bench.py no-such.csv
wrong_arg "not an h5gds-bench CSV" py plot_bench.py out.txt
wrong_arg "required: out_dir" py summarize_shared.py
head -1 r.csv > empty.csv
expect_rc 0 "plot_bench: a CSV with no rows is not an error" py plot_bench.py empty.csv --summary empty.md
grep -q "no rows" out.txt && ok "plot_bench: says there is nothing to plot" || bad "plot_bench: says there is nothing to plot"
expect_rc 0 "shared_file_model in the configuration's units" py shared_file_model.py --ranks 4 --size-per-rank 1MB \
  --stripe 64K

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
