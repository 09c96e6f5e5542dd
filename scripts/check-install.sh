#!/usr/bin/env bash
# Installs the runtime into a scratch prefix and builds examples/out_of_tree against it with
# find_package(mxtasking), as another project would.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work="$top/build/install-check"
rm -rf "$work"
cmake -S "$top" -B "$work/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMX_BUILD_TESTS=OFF \
  -DMX_BUILD_BENCHMARKS=OFF -DMX_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/lib" >/dev/null
cmake --install "$work/lib" >/dev/null
cmake -S "$top/examples/out_of_tree" -B "$work/app" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app" >/dev/null
"$work/app/out_of_tree_app"
echo "install-check: find_package(mxtasking) build OK"
