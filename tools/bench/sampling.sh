#!/usr/bin/env bash
# Sampled vs greedy decoding speed on the tiny text model (129,280-token vocabulary, so the sampler's
# per-token work is the real model's): `deepinfer generate --input-jsonl` with 1 and with 200 requests,
# greedy (temperature 0) and sampled (temperature 1, top_p 0.9, no top_k), each taken in the same run.
#   tools/bench/sampling.sh [path/to/deepinfer] [max_tokens]
# Prints the median of 3 interleaved runs: generated tokens/s per case and the sampled/greedy ratio (the
# median of the per-run ratios), then every run's pair, to show the noise (docs/benchmarks.md).
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

run() { # streams sampled -> generated tokens/s of the engine loop (model load excluded)
  make_input "$1" "$2" >"$tmp/in.jsonl"
  "$bin" generate --model "$model" --input-jsonl "$tmp/in.jsonl" --output-jsonl "$tmp/out.jsonl" \
    --no-progress --max-num-seqs 256 2>"$tmp/err" >/dev/null
  python3 - "$tmp/err" <<'PY'
import re, sys
m = re.search(r"(\d+) generated tokens in ([\d.]+) s", open(sys.argv[1]).read())
print("%.1f" % (int(m.group(1)) / float(m.group(2))))
PY
}

median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

printf "%-8s %12s %12s %8s\n" streams greedy_tok/s sampled_tok/s ratio
for streams in 1 200; do
  gs=() ss=() rs=()
  for _ in 1 2 3; do # interleaved, so both see the same machine load
    g=$(run "$streams" 0)
    s=$(run "$streams" 1)
    gs+=("$g") ss+=("$s") rs+=("$(python3 -c "print($s / $g)")")
  done
  printf "%-8s %12s %12s %8.2f   runs (greedy/sampled):" "$streams" "$(median "${gs[@]}")" "$(median "${ss[@]}")" \
    "$(median "${rs[@]}")"
  for i in 0 1 2; do printf " %s/%s" "${gs[$i]}" "${ss[$i]}"; done
  echo
done
