#!/usr/bin/env bash
# Configure and build one preset (release by default): scripts/build.sh [release|asan|tsan|fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
jobs="${DEEPINFER_BUILD_JOBS:-$(nproc)}"
# DEEPINFER_WERROR=ON|OFF (re)configures with warnings as errors or not (CI: ON).
if [ ! -f "build/$preset/build.ninja" ] || [ -n "${DEEPINFER_WERROR:-}" ]; then
  cmake --preset "$preset" ${DEEPINFER_WERROR:+-DDEEPINFER_WERROR=$DEEPINFER_WERROR} >/dev/null
fi
cmake --build --preset "$preset" -j "$jobs"
