#!/usr/bin/env bash
# Installs the Debian packages mxtasking needs, skipping those already present (idempotent).
# Runs apt-get only when something is missing; needs root for that.
# Then makes build/venv, the Python environment of scripts/tpch.py (DuckDB with its TPC-H
# extension from PyPI, pinned: newer DuckDB releases download the extension at run time).
set -euo pipefail

packages=(
  g++ clang-15 clang-tidy-15 clang-format-15 cmake ninja-build pkg-config make
  libhwloc-dev libnuma-dev            # topology, NUMA-local memory
  libgtest-dev                        # tests
  libtbb-dev                          # oneTBB baselines
  libcli11-dev                        # benchmark drivers' command lines
  libjemalloc-dev libgoogle-perftools-dev  # allocator baselines
  python3 python3-matplotlib          # demo tables and plots
  python3-venv                        # build/venv for scripts/tpch.py (brings pip's wheel)
  libpg-query-dev nlohmann-json3-dev  # TunaDB's SQL parser (PostgreSQL grammar) and its JSON tree
  libreadline-dev                     # line editing and history in the tunadb shell
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
else
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: need root to install packages (run as root or install them by hand: ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages of scripts/tpch.py and of the tunadb package (python/: its build and pytest), in
# a virtual environment of the system Python (not whatever python3 comes first in PATH) so that
# the Debian package above is the one it uses.
duckdb_version=1.5.5
venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/venv"
venv_ready() {
  "$venv/bin/python" - "$duckdb_version" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version
import duckdb, duckdb_extension_tpch
import nanobind, scikit_build_core, pytest, numpy, pyarrow  # the tunadb package: build and tests
sys.exit(0 if duckdb.__version__ == version("duckdb-extension-tpch") == sys.argv[1] else 1)
PY
}
if venv_ready; then
  echo "deps: build/venv has duckdb $duckdb_version and the tunadb build and test packages"
  exit 0
fi
if ! "$venv/bin/python" -c '' 2>/dev/null; then
  rm -rf "$venv"  # missing, or made by a Python that is gone
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  "duckdb==$duckdb_version" "duckdb-extension-tpch==$duckdb_version" \
  nanobind scikit-build-core pytest numpy pyarrow
venv_ready || { echo "deps: duckdb $duckdb_version is not importable in $venv" >&2; exit 1; }
echo "deps: installed duckdb $duckdb_version into build/venv"
