#!/usr/bin/env bash
# Sampled vs greedy decoding speed on the tiny text model (129,280-token vocabulary, so the sampler's
# per-token work is the real model's): `deepinfer generate --input-jsonl` with 1 and with 200 requests,
# greedy (temperature 0) and sampled (temperature 1, top_p 0.9, no top_k), each taken in the same run.
#   tools/bench/sampling.sh [path/to/deepinfer] [max_tokens]
# Prints generated tokens/s per case and the sampled/greedy ratio (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-build/release/src/cli/deepinfer}"
gen="${2:-32}"
model=build/models/tiny-v4-text
[ -f "$model/config.json" ] || "$bin" make-synthetic --preset tiny-text --out "$model" >/dev/null
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

make_input() { # streams, sampled(0/1)
  python3 - "$1" "$2" "$gen" <<'PY'
import json, sys
n, sampled, gen = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
for i in range(n):
    req = {"prompt_ids": [1] + [100 + (i * 7 + j) % 5000 for j in range(16)], "max_tokens": gen,
           "ignore_eos": True, "seed": i}
    req.update({"temperature": 1.0, "top_p": 0.9} if sampled else {"temperature": 0.0})
    print(json.dumps(req))
PY
}

run() { # streams sampled -> tokens/s
  make_input "$1" "$2" >"$tmp/in.jsonl"
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" generate --model "$model" --input-jsonl "$tmp/in.jsonl" --output-jsonl "$tmp/out.jsonl" \
    --no-progress --max-num-seqs 256 >/dev/null 2>&1
  t1=$(date +%s.%N)
  python3 - "$tmp/out.jsonl" "$t0" "$t1" <<'PY'
import json, sys
toks = sum(len(json.loads(l).get("token_ids", json.loads(l).get("output_ids", []))) for l in open(sys.argv[1]))
print("%.1f" % (toks / (float(sys.argv[3]) - float(sys.argv[2]))))
PY
}

printf "%-8s %12s %12s %8s\n" streams greedy_tok/s sampled_tok/s ratio
for streams in 1 200; do
  g=$(run "$streams" 0)
  s=$(run "$streams" 1)
  printf "%-8s %12s %12s %8s\n" "$streams" "$g" "$s" "$(python3 -c "print('%.2f' % ($s / $g))")"
done
