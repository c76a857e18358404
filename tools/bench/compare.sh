#!/usr/bin/env bash
# deepinfer vs Hugging Face transformers on the same synthetic checkpoint (BF16 bench-small by default),
# same prompt, prompt length, generation length and thread count; prints both results and the ratios
# deepinfer/transformers for prefill and decode tok/s, plus deepinfer's fraction of the roofline.
# Env: MODEL (dir; made with make-synthetic --preset bench-small if absent), PROMPT_LEN (64), GEN (32),
# THREADS (2), REPEATS (3), HF_DTYPE (fp32|bf16, default fp32), ORACLE_VENV (an existing venv with
# tools/oracle/requirements.txt; default: build/oracle-venv, created by tools/oracle/venv.sh on first use).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/release/src/cli/deepinfer
model=${MODEL:-build/models/bench-small}
P=${PROMPT_LEN:-64}
N=${GEN:-32}
T=${THREADS:-2}
R=${REPEATS:-3}
[ -x "$bin" ] || scripts/build.sh release >/dev/null
venv=$(tools/oracle/venv.sh)
if [ ! -f "$model/config.json" ]; then
    "$bin" make-synthetic --preset bench-small --out "$model" --threads "$T"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== deepinfer bench --model $model --prompt-len $P --gen $N --threads $T" >&2
"$bin" bench --model "$model" --prompt-len "$P" --gen "$N" --threads "$T" --repeats "$R" \
    --logits-out "$tmp/logits.safetensors" --json >"$tmp/deepinfer.json"
cat "$tmp/deepinfer.json"
echo "== transformers ($($venv/bin/python -c 'import transformers; print(transformers.__version__)'))" >&2
rc=0
"$venv/bin/python" tools/bench/hf_peer.py --model "$model" --prompt-len "$P" --gen "$N" --threads "$T" \
    --repeats "$R" --dtype "${HF_DTYPE:-fp32}" --deepinfer-logits "$tmp/logits.safetensors" \
    >"$tmp/hf.json" || rc=$?
cat "$tmp/hf.json"
"$venv/bin/python" - "$tmp/deepinfer.json" "$tmp/hf.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); h = json.load(open(sys.argv[2]))
print(f"logits: max|Δ| {h.get('logits_max_abs_diff', float('nan')):.3g} "
      f"(max|logit| {h.get('logits_max_abs', float('nan')):.3g}, argmax agreement {h.get('argmax_agreement', 0):.3f})")
print(f"prefill tok/s: deepinfer {d['prefill_tok_s']:.2f}  transformers {h['prefill_tok_s']:.2f}  "
      f"ratio {d['prefill_tok_s'] / h['prefill_tok_s']:.3f}")
print(f"decode  tok/s: deepinfer {d['decode_tok_s']:.2f}  transformers {h['decode_tok_s']:.2f}  "
      f"ratio {d['decode_tok_s'] / h['decode_tok_s']:.3f}")
print(f"deepinfer roofline: decode {100 * d['decode_fraction_of_roofline']:.1f}% of {d['decode_roofline_tok_s']:.1f} tok/s "
      f"({d['read_gb_s']:.1f} GB/s, {d['bytes_per_token'] / 1e6:.1f} MB/token); prefill "
      f"{100 * d['prefill_fraction_of_roofline']:.1f}% of {d['prefill_roofline_tok_s']:.1f} tok/s ({d['fma_gflop_s']:.1f} GFLOP/s)")
PY
exit $rc
