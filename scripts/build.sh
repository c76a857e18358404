#!/usr/bin/env bash
# Configure and build one preset (release by default): scripts/build.sh [release|asan|tsan|fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
jobs="${DEEPINFER_BUILD_JOBS:-$(nproc)}"
# DEEPINFER_WERROR=ON|OFF (re)configures the release build with warnings as errors or not (CI: ON). The
# sanitizer builds (-O1/-O2 with instrumentation) see other false positives and are left out for now.
werror=()
[ "$preset" = release ] && [ -n "${DEEPINFER_WERROR:-}" ] && werror=(-DDEEPINFER_WERROR="$DEEPINFER_WERROR")
if [ ! -f "build/$preset/build.ninja" ] || [ ${#werror[@]} -gt 0 ]; then
  cmake --preset "$preset" "${werror[@]}" >/dev/null
fi
cmake --build --preset "$preset" -j "$jobs"
