#!/usr/bin/env bash
# Tests of h5gds-bench itself (CPU only): argument errors exit 2 with usage,
# the CSV has the documented schema, verification catches a corrupted byte,
# and failures (unwritable directory, full disk) give a clear error and
# leave no files behind.   usage: test_bench.sh BENCH WORKDIR
set -uo pipefail
bench=$1 work=$2
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

expect_rc 0 "--help" "$bench" --help
expect_rc 2 "unknown option" "$bench" --bogus
expect_rc 2 "bad size" "$bench" --sizes 12XB
expect_rc 2 "bad repeat" "$bench" --repeat 0
expect_rc 2 "unknown method" "$bench" --methods FOO
expect_rc 2 "bad threads" "$bench" --threads 0
expect_rc 2 "bad config" "$bench" --config threads=many
expect_rc 2 "stray argument" "$bench" extra
grep -q "usage: h5gds-bench" out.txt && ok "usage printed on error" || bad "usage printed on error"

mkdir -p runs
expect_rc 0 "small run" "$bench" --sizes 1MiB,3MiB --repeat 2 --methods SEC2,GDS --memory host --dir runs --csv r.csv
header=$(head -1 r.csv)
want="method,phase,memory,size_bytes,threads,block_bytes,repeat,seconds,rate_GBps,gpu,cpus,filesystem,kernel,hdf5_version,driver_config,cold_cache"
[ "$header" = "$want" ] && ok "CSV header" || bad "CSV header: $header"
# 2 sizes x 2 repeats x (3 ceiling rows + 2 methods x 3 phases)
rows=$(($(wc -l < r.csv) - 1))
[ "$rows" -eq $((2 * 2 * (3 + 2 * 3))) ] && ok "CSV rows ($rows)" || bad "CSV rows: $rows"
python3 - r.csv <<'PY' && ok "CSV values" || bad "CSV values"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
phases = {"write", "cold_read", "warm_read"}
assert all(len(r) == 16 for r in rows)
assert all(r["phase"] in phases and float(r["rate_GBps"]) > 0 and float(r["seconds"]) > 0 for r in rows)
assert {r["method"] for r in rows} == {"SEC2", "GDS", "CEIL-ODIRECT", "CEIL-PAGECACHE"}
assert {r["size_bytes"] for r in rows} == {str(1 << 20), str(3 << 20)}
assert all(r["memory"] == "host" for r in rows if r["method"] in ("SEC2", "GDS"))
assert all("mode=auto" in r["driver_config"] for r in rows if r["method"] == "GDS")
PY
[ "$(leftovers runs)" -eq 0 ] && ok "no files left after a run" || bad "files left after a run"

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

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
