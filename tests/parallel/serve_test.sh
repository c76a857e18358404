#!/usr/bin/env bash
# `deepinfer serve` under mpirun (label `mpi`): rank 0 owns HTTP, the others follow. Completions (greedy,
# with logprobs; with --cp logprobs within 1e-4) must equal the single-process server's, also after the leader sat idle for more than
# two collective deadlines (its keep-alive thread carries the followers), and SIGTERM to the leader must
# shut the whole job down cleanly (every rank exits 0) within 30 s. Bounded by `timeout`.
#   serve_test.sh MPIRUN DEEPINFER MODEL_DIR TOKENIZER NP "LAYOUT FLAGS" [mpirun transport args...]
set -uo pipefail
mpirun=$1 deepinfer=$2 model=$3 tokenizer=$4 np=$5
read -r -a layout <<<"$6"
shift 6
dir=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DEEPINFER_TOKENIZER=$tokenizer
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/req.py" <<'PY'
import json, sys, urllib.request
port = int(open(sys.argv[1]).read())
name = sys.argv[2]
out = []
for prompt in ["hello", "the quick brown fox", "abc", "x" * 40]:
    body = {"model": name, "prompt": prompt, "max_tokens": 12, "temperature": 0, "logprobs": 2}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    c = json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]
    out.append({"text": c["text"], "logprobs": c.get("logprobs"), "finish": c.get("finish_reason")})
print(json.dumps(out, sort_keys=True))
PY
wait_port() { # FILE
    for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done
    return 1
}
name=$(basename "$model")
common=(--model "$model" --threads 1 --num-kv-blocks 32 --log-level warn)

timeout -s KILL 60 "$deepinfer" serve "${common[@]}" --port 0 --port-file "$dir/port1" 2>"$dir/one.log" &
pids+=($!)
wait_port "$dir/port1" || { echo "FAIL: single-process serve did not start"; cat "$dir/one.log"; exit 1; }
python3 "$dir/req.py" "$dir/port1" "$name" >"$dir/one.json" || { echo "FAIL: single-process requests"; exit 1; }
kill -TERM "${pids[0]}"

timeout -s KILL 90 "$mpirun" --oversubscribe -np "$np" "$@" "$deepinfer" serve "${common[@]}" "${layout[@]}" \
    --collective-deadline-s 5 --port 0 --port-file "$dir/port2" >"$dir/mpi.log" 2>&1 &
mpirun_pid=$!
pids+=($mpirun_pid)
wait_port "$dir/port2" || { echo "FAIL: mpirun serve did not start"; cat "$dir/mpi.log"; exit 1; }
python3 "$dir/req.py" "$dir/port2" "$name" >"$dir/mpi1.json" || { echo "FAIL: requests"; cat "$dir/mpi.log"; exit 1; }
sleep 11 # idle for more than two 5 s deadlines
python3 "$dir/req.py" "$dir/port2" "$name" >"$dir/mpi2.json" || { echo "FAIL: requests after idling"; cat "$dir/mpi.log"; exit 1; }
for f in mpi1 mpi2; do
    case " ${layout[*]} " in
    *" --cp "*) # the CP attention merge regroups sums: text equal, logprobs within 1e-4
        python3 - "$dir/one.json" "$dir/$f.json" <<'PY' || { echo "FAIL: $f differs from one process"; exit 1; }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def same(x, y):
    if isinstance(x, float) and isinstance(y, (int, float)):
        return abs(x - y) < 1e-4
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))
    return x == y
if not same(a, b):
    sys.exit(json.dumps(a)[:400] + "\n" + json.dumps(b)[:400])
PY
        ;;
    *) cmp -s "$dir/one.json" "$dir/$f.json" || { echo "FAIL: $f differs from one process"; diff "$dir/one.json" "$dir/$f.json" | head; exit 1; } ;;
    esac
done
leader=""
for m in $(pgrep -P "$mpirun_pid"); do
    for p in $m $(pgrep -P "$m"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0"; then leader=$p; fi
    done
done
[ -n "$leader" ] || { echo "FAIL: no leader process found"; exit 1; }
t0=$(date +%s)
kill -TERM "$leader"
wait "$mpirun_pid"
rc=$?
elapsed=$(( $(date +%s) - t0 ))
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun exit status $rc after SIGTERM"; cat "$dir/mpi.log"; exit 1; }
[ "$elapsed" -le 30 ] || { echo "FAIL: shutdown took ${elapsed} s"; exit 1; }
echo "ok: ${layout[*]} on $np ranks: completions equal one process's (also after idling); clean shutdown in ${elapsed} s"
