#!/usr/bin/env bash
# Configure and build one preset (release by default): scripts/build.sh [release|asan|tsan|fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
jobs="${DEEPINFER_BUILD_JOBS:-$(nproc)}"
if [ ! -f "build/$preset/build.ninja" ]; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build --preset "$preset" -j "$jobs"
