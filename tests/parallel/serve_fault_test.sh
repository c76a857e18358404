#!/usr/bin/env bash
# A follower of `mpirun -np 2 deepinfer serve --ep 2` is killed (SIGKILL) or stopped (SIGSTOP) while
# streaming clients are being served (label `mpi`). Every client must get either a complete stream
# (finish_reason and [DONE]) or an error (an error event, or an HTTP error status), nothing may hang, and
# the leader must stop serving and exit non-zero within 30 s of the fault, saying why (the parallel job
# failed, naming rank 1). Bounded: the job runs under `timeout`; the clients have a 90 s limit; the
# follower and mpirun are killed on the way out.
#   serve_fault_test.sh MPIRUN DEEPINFER MODEL_DIR TOKENIZER MODE(kill|stop) [mpirun transport args...]
set -uo pipefail
mpirun=$1 deepinfer=$2 model=$3 tokenizer=$4 mode=$5
shift 5
dir=$(mktemp -d)
limit_s=30
clients=6
export DEEPINFER_TOKENIZER=$tokenizer
# shellcheck source=fault_lib.sh
. "$(dirname "$0")/fault_lib.sh"

cat >"$dir/stream.py" <<'PY'
# One client: streaming requests back to back until one fails or the server is gone (90 s at most). Prints
# one line per request: "complete: REASON", "error: ..." (an error event or an HTTP error status),
# "refused: ..." (no connection: the server is gone) or "broken: ..." (a stream that ended without [DONE]
# and without an error event).
import json, sys, time, urllib.error, urllib.request
port, name, i = int(open(sys.argv[1]).read()), sys.argv[2], int(sys.argv[3])
t_end = time.time() + 90
while time.time() < t_end:
    body = {"model": name, "prompt": "client %d " % i + "x" * (i + 1), "max_tokens": 900, "temperature": 0,
            "ignore_eos": True, "stream": True}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        resp = urllib.request.urlopen(req, timeout=90)
    except urllib.error.HTTPError as e:
        print("error: HTTP %d" % e.code, flush=True); break
    except Exception as e:
        print("refused: %r" % e, flush=True); break
    finish, error, done = None, None, False
    try:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:"): continue
            data = line[5:].strip()
            if data == "[DONE]": done = True; break
            ev = json.loads(data)
            if "error" in ev: error = ev["error"]; continue
            for c in ev.get("choices", []):
                if c.get("finish_reason"): finish = c["finish_reason"]
    except Exception as e:
        print("broken: %r after finish=%s error=%s" % (e, finish, error), flush=True); break
    if error is not None:
        print("error: %s" % json.dumps(error)[:200], flush=True); break
    if not (done and finish):
        print("broken: done=%s finish=%s" % (done, finish), flush=True); break
    print("complete: %s" % finish, flush=True)
PY

start_job "$mpirun" "$@" -- \
    "$deepinfer" serve --model "$model" --threads 1 --ep 2 --collective-deadline-s 8 --num-kv-blocks 512 \
    --port 0 --port-file "$dir/port" --log-level warn >"$dir/log" 2>&1

for _ in $(seq 1 600); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || { echo "FAIL: serve did not start"; cat "$dir/log"; exit 1; }
if ! find_ranks 100; then echo "FAIL: the ranks were not found"; cat "$dir/log"; exit 1; fi
name=$(basename "$model")
for i in $(seq 1 "$clients"); do
    timeout -s KILL 100 python3 "$dir/stream.py" "$dir/port" "$name" "$i" >"$dir/client.$i" 2>&1 &
    extra_pids+=($!)
done
sleep 3 # the streams are running (clients request back to back until one fails)
if ! alive "$leader"; then echo "FAIL: the leader exited before the fault"; cat "$dir/log"; exit 1; fi
fault_and_wait "$mode" "$dir/log"
for p in "${extra_pids[@]}"; do wait "$p"; done
extra_pids=()
grep -i "parallel job failed" "$dir/log" | head -3
fail=0
check_leader_exit "$limit_s" "$dir/log" "the parallel job failed: Unavailable" || fail=1
errors=0
for i in $(seq 1 "$clients"); do
    echo "client $i: $(sort "$dir/client.$i" | cut -c1-100 | uniq -c | tr -s ' \n' ' ')"
    [ -s "$dir/client.$i" ] || { echo "FAIL: client $i got no answer at all"; fail=1; }
    grep -q "^error:" "$dir/client.$i" && errors=$((errors + 1))
    if grep -qv "^complete:\|^error:\|^refused:" "$dir/client.$i"; then
        echo "FAIL: client $i: a request got neither a complete response nor an error"; fail=1
    fi
done
[ "$errors" -gt 0 ] || { echo "FAIL: no client saw the failure"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok"
[ "$fail" -eq 0 ] || { echo "--- log"; grep -v "PMIX ERROR" "$dir/log" | head -40; }
exit "$fail"
