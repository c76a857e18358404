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
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
read -r -a layout <<<"${DI_FAULT_LAYOUT:---ep 2}"

python3 -c "
import json
for i in range(400): print(json.dumps({'prompt_ids': [1 + i % 50, 2, 3], 'max_tokens': 600, 'temperature': 0}))
" >"$dir/in.jsonl"
# Each rank's exit status lands in rc.RANK (mpirun's own status does not tell, with recovery enabled).
export DI_FAULT_TEST_DIR=$dir
timeout -s KILL 120 "$mpirun" --oversubscribe -np 2 --mca orte_enable_recovery 1 "$@" \
    sh -c '"$0" "$@"; echo $? >"$DI_FAULT_TEST_DIR/rc.$OMPI_COMM_WORLD_RANK"' \
    "$deepinfer" generate --model "$model" --threads 1 "${layout[@]}" --collective-deadline-s 8 \
    --input-jsonl "$dir/in.jsonl" --no-progress --num-kv-blocks 256 >"$dir/out" 2>"$dir/log" &
mpirun_pid=$!

follower=""
cleanup() {
    if [ -n "$follower" ]; then kill -CONT "$follower" 2>/dev/null; kill -9 "$follower" 2>/dev/null; fi
    kill -9 "$mpirun_pid" 2>/dev/null
    wait "$mpirun_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

rank_pid() { # the deepinfer process of world rank $1 of this job (timeout > mpirun > sh > deepinfer)
    local m s p
    for m in $(pgrep -P "$mpirun_pid"); do
        for s in $(pgrep -P "$m"); do
            for p in $(pgrep -P "$s"); do
                if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
                    echo "$p"
                    return
                fi
            done
        done
    done
}
alive() { # running or stopped, not a zombie
    local s
    s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ -n "$s" ] && [ "${s:0:1}" != "Z" ]
}

leader=""
for _ in $(seq 1 300); do
    leader=$(rank_pid 0)
    follower=$(rank_pid 1)
    [ -n "$leader" ] && [ -n "$follower" ] && break
    sleep 0.1
done
if [ -z "$leader" ] || [ -z "$follower" ]; then echo "FAIL: the ranks did not start"; cat "$dir/log"; exit 1; fi
sleep 3 # loaded and generating
if ! alive "$leader"; then echo "FAIL: the run ended before the fault (make it longer)"; cat "$dir/log"; exit 1; fi
t0=$(date +%s%N)
case "$mode" in
kill) kill -9 "$follower" ;;
stop) kill -STOP "$follower" ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
while alive "$leader"; do
    if [ $(( ($(date +%s%N) - t0) / 1000000000 )) -ge 45 ]; then
        echo "FAIL: the leader still runs 45 s after the fault"; cat "$dir/log"; exit 1
    fi
    sleep 0.1
done
elapsed_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
rc=$(cat "$dir/rc.0" 2>/dev/null || echo missing)
echo "leader exited ${elapsed_ms} ms after the fault with status $rc"
grep -v "PMIX ERROR" "$dir/log" | head -5
fail=0
[ "$elapsed_ms" -le $((limit_s * 1000)) ] || { echo "FAIL: more than ${limit_s} s"; fail=1; }
[ "$rc" != "0" ] && [ "$rc" != "missing" ] || { echo "FAIL: leader exit status $rc"; fail=1; }
grep -q "Unavailable" "$dir/log" || { echo "FAIL: no Unavailable error in the log"; fail=1; }
grep -q "rank(s) 1\|rank 1" "$dir/log" || { echo "FAIL: the error does not name rank 1"; fail=1; }
# Every request got an answer: the finished ones their tokens, the others an error.
[ "$(wc -l <"$dir/out")" -eq 400 ] || { echo "FAIL: $(wc -l <"$dir/out") of 400 output lines"; fail=1; }
grep -q '"error"' "$dir/out" || { echo "FAIL: no request failed"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok"
exit "$fail"
