#!/usr/bin/env bash
# Installs the Debian packages mxtasking needs, skipping those already present (idempotent).
# Runs apt-get only when something is missing; needs root for that.
set -euo pipefail

packages=(
  g++ clang-15 clang-tidy-15 clang-format-15 cmake ninja-build pkg-config make
  libhwloc-dev libnuma-dev            # topology, NUMA-local memory
  libgtest-dev                        # tests
  libtbb-dev                          # oneTBB baselines
  libcli11-dev                        # benchmark drivers' command lines
  libjemalloc-dev libgoogle-perftools-dev  # allocator baselines
  python3 python3-matplotlib          # demo tables and plots
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: need root to install packages (run as root or install them by hand: ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
