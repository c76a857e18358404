#!/usr/bin/env bash
# The README's main job: build deepinfer and run it on the tiny model the repo ships.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release >/dev/null
bin=build/release/src/cli/deepinfer
model=models/tiny-v4
echo "== deepinfer inspect $model"
"$bin" inspect "$model"
echo
echo "== deepinfer generate --model $model --prompt-ids 5,6,7,8,9 --max-tokens 16 (greedy token ids)"
"$bin" generate --model "$model" --prompt-ids 5,6,7,8,9 --max-tokens 16
