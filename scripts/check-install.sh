#!/usr/bin/env bash
# Installs the runtime into a scratch prefix and builds examples/out_of_tree against it with
# find_package(mxtasking), as another project would. The library is built with MX_ASSERTS=ON
# (MX_CHECK_ASSERTS=OFF to leave it off): the consumer must then compile with MX_ENABLE_ASSERTS
# too. The installed package must not name a library path of the machine it was built on.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work="$top/build/install-check"
asserts="${MX_CHECK_ASSERTS:-ON}"
rm -rf "$work"
cmake -S "$top" -B "$work/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMX_BUILD_TESTS=OFF \
  -DMX_BUILD_BENCHMARKS=OFF -DMX_BUILD_EXAMPLES=OFF -DMX_ASSERTS="$asserts" \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/lib" >/dev/null
cmake --install "$work/lib" >/dev/null
exports=("$work"/prefix/lib*/cmake/mxtasking/mxtaskingTargets*.cmake)
if grep -n -E '/[^" ;]*lib(numa|pg_query)[^" ;]*\.(so|a)' "${exports[@]}"; then
  echo "install-check: the installed targets name a library path of this machine (above)" >&2
  exit 1
fi
cmake -S "$top/examples/out_of_tree" -B "$work/app" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
cmake --build "$work/app" >/dev/null
if [[ "$asserts" == ON ]] && ! grep -q 'MX_ENABLE_ASSERTS=1' "$work/app/compile_commands.json"; then
  echo "install-check: the library has MX_ASSERTS=ON, but the consumer compiles without MX_ENABLE_ASSERTS" >&2
  exit 1
fi
if [[ "$asserts" != ON ]] && grep -q 'MX_ENABLE_ASSERTS' "$work/app/compile_commands.json"; then
  echo "install-check: the library has MX_ASSERTS=OFF, but the consumer compiles with MX_ENABLE_ASSERTS" >&2
  exit 1
fi
"$work/app/out_of_tree_app"
echo "install-check: find_package(mxtasking) build OK (MX_ASSERTS=$asserts)"
