#!/usr/bin/env bash
# Files written through gds open with HDF5's own tools (sec2) and the other
# way round; on HDF5 >= 1.14 the unmodified tools also run on the gds plugin.
# usage: interop.sh WRITE_SAMPLE TOOLS_DIR WORKDIR [PLUGIN_DIR]
set -uo pipefail
write_sample=$1 tools=$2 work=$3 plugin=${4:-}
mkdir -p "$work" && cd "$work" || exit 1
fail=0 pass=0
check() { # description, command...
  local what=$1; shift
  if "$@" >"$work/out.txt" 2>&1; then pass=$((pass + 1)); echo "PASS $what"
  else fail=$((fail + 1)); echo "FAIL $what"; sed 's/^/    /' "$work/out.txt" | head -20; fi
}
same_dump() { # file1 file2 [env...]: h5dump output identical but for the file name line
  local a=$1 b=$2; shift 2
  env "$@" "$tools/h5dump" "$a" | sed 1d >"$work/dump_a.txt" || return 1
  env "$@" "$tools/h5dump" "$b" | sed 1d >"$work/dump_b.txt" || return 1
  cmp -s "$work/dump_a.txt" "$work/dump_b.txt" || { diff "$work/dump_a.txt" "$work/dump_b.txt" | head; return 1; }
}
unset HDF5_DRIVER HDF5_DRIVER_CONFIG
check "write with gds" "$write_sample" gds.h5 gds
check "write with sec2" "$write_sample" sec2.h5 sec2
check "h5ls -r reads the gds file" "$tools/h5ls" -r gds.h5
check "h5dump: gds file == sec2 file" same_dump gds.h5 sec2.h5
check "h5diff gds.h5 sec2.h5" "$tools/h5diff" gds.h5 sec2.h5
if [ -n "$plugin" ]; then
  P=(HDF5_DRIVER=gds "HDF5_PLUGIN_PATH=$plugin")
  check "plugin: h5dump (HDF5_DRIVER=gds) of the sec2 file" same_dump sec2.h5 gds.h5 "${P[@]}"
  check "plugin: h5ls -r" env "${P[@]}" "$tools/h5ls" -r sec2.h5
  check "plugin: h5diff" env "${P[@]}" "$tools/h5diff" gds.h5 sec2.h5
  # (h5ls/h5dump retry other drivers when one fails, so use a plain program)
  check "plugin: bad HDF5_DRIVER_CONFIG makes H5Fcreate fail with a clear error" bash -c \
    "! env ${P[*]} HDF5_DRIVER_CONFIG=threads=zero '$write_sample' bad.h5 default 2>err.txt && grep -q \"key 'threads' = 'zero'\" err.txt"
  # an unmodified program (default fapl) writes through the plugin
  check "plugin: default fapl writes through gds" bash -c \
    "env ${P[*]} '$write_sample' plugin.h5 default | grep -q 'driver: gds'"
  check "plugin-written file == sec2 file" same_dump plugin.h5 sec2.h5
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
