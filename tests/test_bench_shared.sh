#!/usr/bin/env bash
# h5gds-bench's shared-file methods under MPI (CPU only, host memory, 2
# ranks): GDS-SHARED (gds_mpio) and MPIO-HOST (mpio), 1-D slabs and 2-D
# blocks with rank boundaries every 4099 elements. Checks the per-rank and
# aggregate rows, that GDS-SHARED's raw data went through the engine (the
# driver's statistics: each rank's bytes each phase) while MPIO-HOST's did
# not, that a corrupted byte of the shared file fails the run, and that the
# methods are refused clearly without mpirun.
#   usage: test_bench_shared.sh BENCH WORKDIR MPIEXEC [MPIEXEC ARGS...]
set -uo pipefail
bench=$1 work=$2; shift 2
launch=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$work" && mkdir -p "$work/runs" && cd "$work" || exit 1
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f out.txt ] && sed 's/^/    /' out.txt | tail -12; }

for decomp in slab boundary; do
  extra=(); [ $decomp = boundary ] && extra=(--boundary 4099)
  timeout 300 "${launch[@]}" -np 2 -x H5GDS_STATS=1 "$bench" --memory host --sizes 3MiB --repeat 2 \
    --methods GDS-SHARED,MPIO-HOST,GDS --dir runs --csv $decomp.csv "${extra[@]}" >out.txt 2>&1
  rc=$?
  [ $rc -eq 0 ] && ok "$decomp: 2-rank run (exit 0)" || bad "$decomp: 2-rank run: exit $rc"
  grep -q "shared file: " out.txt && ok "$decomp: banner names the shared file" || bad "$decomp: banner"
  python3 - $decomp.csv $decomp out.txt <<'PY' && ok "$decomp: CSV rows and engine statistics" || bad "$decomp: CSV rows and engine statistics"
import csv, sys, collections, re
path, decomp, out = sys.argv[1:4]
rows = list(csv.DictReader(open(path)))
size = 3 << 20
if decomp == "boundary":
    size = size // 4099 * 4099  # whole rows
groups = collections.defaultdict(dict)
for r in rows:
    assert float(r["seconds"]) > 0, r
    key = (r["method"], r["phase"], r["repeat"])
    groups[key][r["rank"]] = r
methods = {k[0] for k in groups}
assert {"GDS-SHARED", "MPIO-HOST", "GDS", "CEIL-ODIRECT"} <= methods, methods
for m in ("GDS-SHARED", "MPIO-HOST"):
    for ph in ("write", "cold_read", "warm_read"):
        for rep in ("0", "1"):
            g = groups[(m, ph, rep)]
            assert set(g) == {"0", "1", "all"}, (m, ph, rep, set(g))
            assert int(g["0"]["size_bytes"]) == size and int(g["all"]["size_bytes"]) == 2 * size, g["all"]
            slowest = max(float(g["0"]["seconds"]), float(g["1"]["seconds"]))
            assert abs(float(g["all"]["seconds"]) - slowest) < 2e-6
            cfg = g["0"]["driver_config"]
            assert ("boundary=4099" in cfg) == (decomp == "boundary"), cfg
# the driver's statistics: one line per rank and close of a gds_mpio file.
# GDS-SHARED: per repeat 1 write + 2 reads of `size` bytes per rank, all
# through the engine; MPIO-HOST opens no gds_mpio file.
lines = [l for l in open(out) if "h5gds-mpio stats" in l]
writes = [int(re.search(r"engine write (\d+) B", l).group(1)) for l in lines]
reads = [int(re.search(r"\), read (\d+) B", l).group(1)) for l in lines]
assert len(lines) == 2 * 2 * 3, len(lines)
assert sorted(w for w in writes if w) == [size] * 4, writes
assert sorted(r for r in reads if r) == [size] * 8, reads
assert all("handed to mpio 0 B" in l for l in lines), lines
PY
done
[ -z "$(ls -A runs)" ] && ok "no files left after the runs" || bad "files left: $(ls runs)"

# A byte of the shared file changed after the write: the read must fail.
timeout 120 "${launch[@]}" -np 2 "$bench" --memory host --sizes 1MiB --repeat 1 --methods GDS-SHARED --no-ceilings \
  --dir runs --csv c.csv --inject-corruption >out.txt 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "verification failed: GDS-SHARED" out.txt \
  && ok "corruption: detected (exit $rc)" || bad "corruption: exit $rc"

# Without mpirun the shared-file methods are refused with a reason.
"$bench" --memory host --sizes 1MiB --methods GDS-SHARED --dir runs --csv s.csv >out.txt 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "run under mpirun" out.txt && ok "no mpirun: refused clearly" || bad "no mpirun: exit $rc"
"$bench" --memory host --sizes 1MiB --methods GDS --boundary 4099 --dir runs --csv s.csv >out.txt 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "boundary" out.txt && ok "--boundary without a shared method: refused" || bad "--boundary alone: exit $rc"
echo "bench shared: $pass passed, $fail failed"
[ $fail -eq 0 ]
