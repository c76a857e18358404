#!/usr/bin/env bash
# A follower of `mpirun -np 2 deepinfer generate --ep 2` (engine mode, ~100k tokens: longer than the 3 s
# before the fault even on a quiet machine) is killed
# with SIGKILL or stopped with SIGSTOP mid-run (label `mpi`). The leader must fail the in-flight requests
# with an error naming the lost rank and exit within 30 s of the fault; nothing may hang. Bounded: the job
# runs under `timeout`, and the follower and mpirun are killed on the way out.
#   generate_fault_test.sh MPIRUN DEEPINFER MODEL_DIR MODE(kill|stop) [mpirun transport args...]
# DI_FAULT_LAYOUT overrides the layout flags (default "--ep 2"; e.g. "--cp 2 --block-size 8").
set -uo pipefail
mpirun=$1 deepinfer=$2 model=$3 mode=$4
shift 4
dir=$(mktemp -d)
limit_s=30
# shellcheck source=fault_lib.sh
. "$(dirname "$0")/fault_lib.sh"
read -r -a layout <<<"${DI_FAULT_LAYOUT:---ep 2}"

python3 -c "
import json
for i in range(400): print(json.dumps({'prompt_ids': [1 + i % 50, 2, 3], 'max_tokens': 600, 'temperature': 0}))
" >"$dir/in.jsonl"
start_job "$mpirun" "$@" -- \
    "$deepinfer" generate --model "$model" --threads 1 "${layout[@]}" --collective-deadline-s 8 \
    --input-jsonl "$dir/in.jsonl" --no-progress --num-kv-blocks 256 >"$dir/out" 2>"$dir/log"

if ! find_ranks 300; then echo "FAIL: the ranks did not start"; cat "$dir/log"; exit 1; fi
sleep 3 # loaded and generating
if ! alive "$leader"; then echo "FAIL: the run ended before the fault (make it longer)"; cat "$dir/log"; exit 1; fi
fault_and_wait "$mode" "$dir/log"
grep -v "PMIX ERROR" "$dir/log" | head -5
fail=0
check_leader_exit "$limit_s" "$dir/log" "Unavailable" || fail=1
# Every request got an answer: the finished ones their tokens, the others an error.
[ "$(wc -l <"$dir/out")" -eq 400 ] || { echo "FAIL: $(wc -l <"$dir/out") of 400 output lines"; fail=1; }
grep -q '"error"' "$dir/out" || { echo "FAIL: no request failed"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok"
exit "$fail"
