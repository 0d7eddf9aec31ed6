#!/usr/bin/env bash
# scripts/build-hdf5.sh's choice of where HDF5 1.14.5's source comes from,
# replayed on the stock apt sources of Debian 12 (deb822 and one-line),
# Ubuntu 24.04 (deb822, also ports) and others: no root, no network.
#   test_hdf5_source.sh <build-hdf5.sh> <fixtures dir (tests/fixtures/apt)>
set -u
script=$1 fixtures=$2
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
fails=0 checks=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
expect() { # fixture, expected "URI SUITE KEYRING" (empty: must fail)
    local got rc
    got=$(bash "$script" --print-source "$fixtures/$1" 2>"$err"); rc=$?
    checks=$((checks + 1))
    if [ -z "$2" ]; then
        if [ $rc -eq 0 ] || ! grep -q "supported: Debian 12, Ubuntu 24.04" "$err"; then
            echo "FAIL $1: expected a refusal naming what is supported, got rc=$rc '$got'"; fails=$((fails + 1))
        fi
    elif [ $rc -ne 0 ] || [ "$(echo "$got" | cut -d' ' -f1-3)" != "$2" ]; then
        echo "FAIL $1: expected '$2', got rc=$rc '$got' $(cat "$err")"; fails=$((fails + 1))
    else
        echo "ok   $1: $got"
    fi
}
expect debian12-deb822   "http://deb.debian.org/debian trixie $keyring"
expect debian12-oneline  "http://deb.debian.org/debian trixie $keyring"
expect debian12-mirror   "https://mirror.example.org/debian trixie $keyring"
expect ubuntu2404        "http://deb.debian.org/debian trixie $keyring"
expect ubuntu2404-ports  "http://deb.debian.org/debian trixie $keyring"
expect none              ""
expect does-not-exist    ""
echo "$((checks - fails)) passed, $fails failed"
[ $fails -eq 0 ]
