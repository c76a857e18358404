#!/usr/bin/env bash
# Decode speed, traffic and memory of one model run as 1 process x 2 threads and as 2 ranks x 1 thread
# (--ep 2, --tp 2) under mpirun (docs/benchmarks.md, "Multi-process decode").
#   bench/parallel_decode.sh DEEPINFER MODEL_DIR [decode tokens, default 32]
# Decode ms/step is `generate --profile`'s decode line (prefill excluded); bytes per decode step per rank
# is (bytes sent with N + 1 tokens - bytes sent with 1 token) / N; peak RSS per process from VmHWM
# (mpirun runs) or /usr/bin/time (one process). The greedy tokens of every run must be equal.
set -euo pipefail
deepinfer=$1 model=$2 n=${3:-32}
prompt=1,2,3,4,5,6,7,8
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/time -f "%M" -o "$tmp/rss" "$deepinfer" generate --model "$model" --threads 2 --prompt-ids $prompt \
    --max-tokens $((n + 1)) --profile >"$tmp/one.out" 2>"$tmp/one.err"
printf "%-22s %10s %12s %s\n" layout "decode ms" "KiB/step" "peak RSS MiB per process"
printf "%-22s %10s %12s %s\n" "1 process x 2 threads" \
    "$(grep -o 'decode: [0-9]* forward(s), [0-9.]*' "$tmp/one.err" | awk '{print $4}')" - \
    "$(awk '{printf "%.0f", $1 / 1024}' "$tmp/rss")"
for layout in "--ep 2" "--tp 2"; do
    for tokens in 1 $((n + 1)); do
        "${mpi[@]}" "$deepinfer" generate --model "$model" --threads 1 $layout --prompt-ids $prompt \
            --max-tokens $tokens --profile >"$tmp/p$tokens.out" 2>"$tmp/p$tokens.err"
    done
    cmp -s "$tmp/one.out" "$tmp/p$((n + 1)).out" || { echo "tokens differ for $layout"; exit 1; }
    sent() { grep -o "rank $1: .* \([0-9]*\) bytes sent" "$2" | grep -o "[0-9]* bytes" | awk '{print $1}'; }
    per_step=""
    for r in 0 1; do
        a=$(sent $r "$tmp/p1.err") b=$(sent $r "$tmp/p$((n + 1)).err")
        per_step+="$(( (b - a) / n / 1024 )) "
    done
    rss=$(grep -o "rank [01]: peak RSS [0-9.]*" "$tmp/p$((n + 1)).err" | awk '{printf "%.0f ", $5}')
    printf "%-22s %10s %12s %s\n" "2 ranks x 1 thread $layout" \
        "$(grep -o 'decode: [0-9]* forward(s), [0-9.]*' "$tmp/p$((n + 1)).err" | awk '{print $4}')" \
        "$per_step" "$rss"
done
