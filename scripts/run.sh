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

# A text model: tiny-v4's architecture with the real DeepSeek V4 vocabulary (129280 tokens), random weights
# from a fixed seed (deterministic, no torch), for the tokenizer and the server to run text end to end.
text_model=build/models/tiny-v4-text
if [ ! -f "$text_model/config.json" ]; then
    echo
    echo "== deepinfer make-synthetic --preset tiny-text --out $text_model"
    "$bin" make-synthetic --preset tiny-text --out "$text_model"
fi
echo
echo "== deepinfer inspect $text_model"
"$bin" inspect "$text_model"
