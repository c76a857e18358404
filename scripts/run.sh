#!/usr/bin/env bash
# The README's main job: build deepinfer and run it on the tiny model the repo ships.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release >/dev/null
model=models/tiny-v4
echo "== deepinfer inspect $model"
build/release/src/cli/deepinfer inspect "$model"
