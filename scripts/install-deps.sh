#!/usr/bin/env bash
# Installs what h5gds needs to build and test, idempotently:
#   - Debian/Ubuntu packages (compiler, CMake, Ninja, the distribution's HDF5 1.10 and tools);
#   - CUDA headers (cuda.h, cufile.h): from the CUDA toolkit when present, else
#     unpacked from the PyPI wheels nvidia-cuda-runtime and nvidia-cufile into
#     build/deps/cuda-headers. No CUDA library is linked: they are loaded at run time.
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
say "done"
