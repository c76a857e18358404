#!/usr/bin/env bash
# The README's main job: build deepinfer, inspect the tiny model the repo ships, then serve it over the
# OpenAI API on a free loopback port, send one chat request, and stop the server.
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
echo
tok=data/tokenizer/deepseek-v4/tokenizer.json
echo "== deepinfer generate --model $text_model --tokenizer $tok --prompt 'The capital of France is' (greedy; random weights, so the words are noise)"
"$bin" generate --model "$text_model" --tokenizer "$tok" --prompt "The capital of France is" --max-tokens 8

echo
echo "== deepinfer serve --model $text_model --tokenizer $tok"
port_file="$(mktemp)"
"$bin" serve --model "$text_model" --tokenizer "$tok" --host 127.0.0.1 --port 0 --port-file "$port_file" --log-level warn &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$port_file"' EXIT
for _ in $(seq 1 600); do
  if [ -s "$port_file" ] && curl -sf "http://127.0.0.1:$(cat "$port_file")/health" >/dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "the server exited" >&2; exit 1; }
  sleep 0.1
done
url="http://127.0.0.1:$(cat "$port_file")/v1/chat/completions"
body='{"model": "tiny-v4-text", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16, "temperature": 1.0, "seed": 1}'
echo "POST $url"
echo "$body"
curl -sS --max-time 120 "$url" -H 'Content-Type: application/json' -d "$body" | python3 -m json.tool
