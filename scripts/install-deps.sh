#!/usr/bin/env bash
# Installs what h5gds needs to build and test, idempotently:
#   - Debian/Ubuntu packages (compiler, CMake, Ninja, the distribution's HDF5 1.10 and tools);
#   - CUDA headers (cuda.h, cufile.h): from the CUDA toolkit when present, else
#     unpacked from the PyPI wheels nvidia-cuda-runtime and nvidia-cufile into
#     build/deps/cuda-headers. No CUDA library is linked: they are loaded at run time.
#   - HDF5 2.x headers (Debian unstable's libhdf5-dev, unpacked, not installed)
#     in build/deps/hdf5-2-headers: tests/declarations checks the Python
#     package's own HDF5 declarations against them. Optional: without them
#     that one check is not built.
# The machine's apt sources are never changed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps="${H5GDS_DEPS:-$root/build/deps}"
mkdir -p "$deps"

say() { printf 'install-deps: %s\n' "$*"; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(build-essential cmake ninja-build pkg-config libhdf5-dev hdf5-tools zlib1g-dev dpkg-dev
          python3 python3-pip python3-venv unzip ca-certificates libopenmpi-dev openmpi-bin clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# cmake >= 3.25 is required (Debian 12 and Ubuntu 24.04 have it).
cmake_version=$(cmake --version | head -1 | awk '{print $3}')
if [ "$(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -1)" != "3.25" ]; then
  say "cmake $cmake_version is older than 3.25"; exit 1
fi

# CUDA headers.
have_header() {
  for d in "${CUDA_HOME:-/usr/local/cuda}/include" /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include \
           "$deps/cuda-headers/include"; do
    [ -f "$d/$1" ] && return 0
  done
  return 1
}
if have_header cuda.h && have_header cufile.h; then
  say "CUDA headers present"
else
  say "fetching CUDA headers from the nvidia-cuda-runtime and nvidia-cufile wheels"
  wheels="$deps/cuda-wheels"
  mkdir -p "$wheels" "$deps/cuda-headers/include"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" \
      "nvidia-cuda-runtime==13.5.37" "nvidia-cufile==1.20.0.107"
  tmp=$(mktemp -d)
  for w in "$wheels"/nvidia_cuda_runtime-*.whl "$wheels"/nvidia_cufile-*.whl; do
    unzip -q -o "$w" 'nvidia/*/include/*' -d "$tmp"
  done
  cp -r "$tmp"/nvidia/*/include/. "$deps/cuda-headers/include/"
  rm -rf "$tmp"
  have_header cuda.h && have_header cufile.h || { say "CUDA headers still missing"; exit 1; }
fi
# HDF5 2.x headers, for tests/declarations. The package is downloaded through
# a private apt configuration (the archive scripts/build-hdf5.sh chooses,
# suite unstable) and unpacked with dpkg-deb; nothing is installed.
hdf5_2="$deps/hdf5-2-headers"
if [ -f "$hdf5_2/usr/include/hdf5/serial/H5public.h" ]; then
  say "HDF5 2.x headers present ($hdf5_2)"
else
  read -r archive _suite keyring _why < <(bash "$root/scripts/build-hdf5.sh" --print-source 2>/dev/null || true)
  apt2="$deps/apt-unstable"
  if [ -n "${archive:-}" ] && [ -f "${keyring:-/nonexistent}" ]; then
    say "fetching HDF5 2.x headers (libhdf5-dev of Debian unstable, unpacked into $hdf5_2)"
    mkdir -p "$apt2/etc/apt.conf.d" "$apt2/etc/preferences.d" "$apt2/etc/sources.list.d" "$apt2/lists/partial" \
             "$apt2/cache/archives/partial" "$apt2/state" "$apt2/download"
    echo "deb [signed-by=$keyring] $archive unstable main" >"$apt2/etc/sources.list"
    touch "$apt2/state/status"
    aptopt=(-o "Dir::Etc=$apt2/etc" -o "Dir::State=$apt2/state" -o "Dir::State::Lists=$apt2/lists"
            -o "Dir::Cache=$apt2/cache" -o "Dir::State::status=$apt2/state/status" -o "APT::Sandbox::User=root")
    if apt-get "${aptopt[@]}" update -qq >"$apt2/update.log" 2>&1 &&
       (cd "$apt2/download" && rm -f libhdf5-dev_*.deb && apt-get "${aptopt[@]}" download libhdf5-dev >"$apt2/download.log" 2>&1); then
      deb=$(ls "$apt2"/download/libhdf5-dev_*.deb)
      case "$(dpkg-deb -f "$deb" Version)" in
        2.*) rm -rf "$hdf5_2" && dpkg-deb -x "$deb" "$hdf5_2" && say "HDF5 $(dpkg-deb -f "$deb" Version) headers in $hdf5_2" ;;
        *) say "Debian unstable's libhdf5-dev is $(dpkg-deb -f "$deb" Version), not 2.x: no 2.x check" ;;
      esac
    else
      say "could not fetch libhdf5-dev from Debian unstable (see $apt2/*.log): no 2.x check"
    fi
  else
    say "no Debian archive to fetch HDF5 2.x headers from: no 2.x check"
  fi
fi
say "done"
