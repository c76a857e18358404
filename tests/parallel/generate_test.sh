#!/usr/bin/env bash
# `deepinfer generate` under mpirun (label `mpi`): the output of `mpirun -np NP deepinfer generate LAYOUT`
# (e.g. --ep 2, --tp 4, --tp 2 --ep 2, --cp 2) must equal the single-process run's, for every golden prompt of the
# model, through both modes of generate:
#   * the engine (--input-jsonl): every golden prompt greedy (32 tokens, with logprobs, whose printed
#     values must match too), plus one sampled line with n = 2 (a slot fork, replayed by the followers);
#   * one prompt (--prompt-ids-file): the longest golden prompt, greedy, chunked prefill.
# With --cp the logprobs may differ in the last bits (the attention merge regroups sums): they must agree
# within 1e-4 (DI_CP_LOGPROB_TOL overrides it: tiny-v41-fp8, whose cache fake-quant turns last bits into a
# quantization step at a rounding boundary), everything else (tokens, finish reasons) exactly.
# Bounded: every run is under `timeout`.
#   generate_test.sh MPIRUN DEEPINFER MODEL_DIR GOLDENS NP "LAYOUT FLAGS" [mpirun transport args...]
set -euo pipefail
mpirun=$1 deepinfer=$2 model=$3 goldens=$4 np=$5
read -r -a layout <<<"$6"
shift 6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The golden prompts (I64 tensors prompt.N.ids of the goldens safetensors): one JSONL line each, and the
# longest one as an ids file.
python3 - "$goldens" "$dir" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
prompts = []
while f"prompt.{len(prompts)}.ids" in header:
    b, end = header[f"prompt.{len(prompts)}.ids"]["data_offsets"]
    prompts.append(list(struct.unpack(f"<{(end - b) // 8}q", data[b:end])))
assert prompts, "no golden prompts in " + sys.argv[1]
longest = max(prompts, key=len)
with open(sys.argv[2] + "/in.jsonl", "w") as out:
    for ids in prompts:
        out.write(json.dumps({"prompt_ids": ids, "max_tokens": 32, "temperature": 0, "logprobs": 2}) + "\n")
    out.write(json.dumps({"prompt_ids": longest[:20], "max_tokens": 12, "temperature": 0.8, "seed": 3,
                          "n": 2}) + "\n")
with open(sys.argv[2] + "/longest.ids", "w") as out:
    out.write(",".join(map(str, longest)))
PY

run_both() { # NAME GENERATE_ARGS...: the single-process and the EP run, outputs compared byte for byte
    local name=$1
    shift
    timeout -s KILL 60 "$deepinfer" generate --model "$model" --threads 1 "$@" \
        >"$dir/$name.one" 2>"$dir/$name.one.err" || { echo "FAIL: single-process $name"; cat "$dir/$name.one.err"; exit 1; }
    timeout -s KILL 60 "$mpirun" --oversubscribe -np "$np" "${mpi_args[@]}" "$deepinfer" generate --model "$model" \
        --threads 1 "${layout[@]}" --profile "$@" \
        >"$dir/$name.ep" 2>"$dir/$name.ep.err" || { echo "FAIL: mpirun -np $np ${layout[*]} $name"; cat "$dir/$name.ep.err"; exit 1; }
    if [ "$approx" = 1 ]; then
        # CP merges attention partials in another grouping (docs/parallelism.md): tokens and everything
        # else equal, logprobs within 1e-4 (or DI_CP_LOGPROB_TOL).
        python3 - "$dir/$name.one" "$dir/$name.ep" "${DI_CP_LOGPROB_TOL:-1e-4}" <<'PY' || { echo "FAIL: $name: ${layout[*]} output differs from one process"; exit 1; }
import json, sys
worst, tol = 0.0, float(sys.argv[3])
def same(a, b, key=""):
    global worst
    if isinstance(a, float) and isinstance(b, (int, float)) and key == "logprob":
        worst = max(worst, abs(a - b))
        return abs(a - b) < tol
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, key) for x, y in zip(a, b))
    return a == b
one, ep = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines()
if len(one) != len(ep):
    sys.exit(f"{len(one)} vs {len(ep)} lines")
for i, (a, b) in enumerate(zip(one, ep)):
    try:
        ja, jb = json.loads(a), json.loads(b)
    except ValueError:
        ja, jb = a, b
    if not same(ja, jb):
        sys.exit(f"line {i + 1} differs:\n{a[:300]}\n{b[:300]}")
print(f"max |logprob - one process| = {worst:.3g}")
PY
    elif ! cmp -s "$dir/$name.one" "$dir/$name.ep"; then
        echo "FAIL: $name: ${layout[*]} output differs from one process"
        diff "$dir/$name.one" "$dir/$name.ep" | head -20
        exit 1
    fi
    [ -s "$dir/$name.one" ] || { echo "FAIL: $name: empty output"; exit 1; }
    echo "ok: $name ($(wc -l <"$dir/$name.one") lines equal)"
}

mpi_args=("$@")
approx=0
case " ${layout[*]} " in *" --cp "*) approx=1 ;; esac
run_both engine --input-jsonl "$dir/in.jsonl" --no-progress --num-kv-blocks 48
run_both one-prompt --prompt-ids-file "$dir/longest.ids" --max-tokens 24 --chunk-size 7
# The EP load statistics were exchanged (every rank entered the all-gather) and printed by the leader; a
# layout without EP or TP (--cp alone) has a MoE group of one rank and no statistics.
case " ${layout[*]} " in *" --ep "* | *" --tp "*) ;; *)
    grep "step protocol" "$dir/one-prompt.ep.err"
    exit 0 ;;
esac
grep -q "EP load" "$dir/one-prompt.ep.err" || { echo "FAIL: no EP load statistics"; cat "$dir/one-prompt.ep.err"; exit 1; }
grep "EP load\|step protocol" "$dir/one-prompt.ep.err"
