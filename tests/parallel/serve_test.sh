#!/usr/bin/env bash
# `deepinfer serve` under mpirun (label `mpi`): rank 0 owns HTTP, the others follow. Completions (greedy,
# with logprobs) must equal the single-process server's, also after the leader sat idle for more than
# two collective deadlines (its keep-alive thread carries the followers); /metrics must carry the EP load
# statistics (deepinfer_ep_*: one series per expert and per MoE rank, totals that are whole multiples of
# top-k x layers, windows that add up); and SIGTERM to the leader must shut the whole job down cleanly
# (every rank exits 0) within 30 s. Bounded by `timeout`.
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
cat >"$dir/metrics.py" <<'PY'
# Checks the EP load statistics on /metrics against the model's shape and the MoE group size.
import json, re, sys, urllib.request
port, model, ranks = int(open(sys.argv[1]).read()), sys.argv[2], int(sys.argv[3])
cfg = json.load(open(model + "/config.json"))
cfg = cfg.get("text_config", cfg)
E, K, L = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["num_hidden_layers"]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
def series(name):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^" + name + r'\{\w+="(\d+)"\} (\d+)$', text, re.M)}
def scalar(name):
    m = re.search(r"^" + name + r" (\S+)$", text, re.M)
    if not m: sys.exit("FAIL: /metrics has no " + name)
    return float(m.group(1))
total, window, per_rank = (series("deepinfer_ep_expert_tokens_total"), series("deepinfer_ep_expert_tokens"),
                           series("deepinfer_ep_rank_tokens"))
errors = []
if scalar("deepinfer_ep_load_exchanges_total") < 1: errors.append("no exchange yet")
if sorted(map(int, total)) != list(range(E)): errors.append("expert totals for %s, want 0..%d" % (sorted(total), E - 1))
if sorted(map(int, window)) != list(range(E)): errors.append("expert window for %s" % sorted(window))
if sorted(map(int, per_rank)) != list(range(ranks)): errors.append("rank series %s, want %d ranks" % (sorted(per_rank), ranks))
s = sum(total.values())
if s <= 0 or s % (K * L): errors.append("expert totals sum %d: not a positive multiple of top-k %d x layers %d" % (s, K, L))
if sum(window.values()) % (K * L): errors.append("window sum %d not a multiple of %d" % (sum(window.values()), K * L))
if sum(per_rank.values()) != sum(window.values()): errors.append("EP rank rows %d != expert rows %d" % (sum(per_rank.values()), sum(window.values())))
if any(total[e] < window[e] for e in window): errors.append("a window exceeds its total")
imb = scalar("deepinfer_ep_rank_imbalance")
if sum(window.values()) > 0 and not 1.0 <= imb <= ranks: errors.append("EP rank imbalance %g outside [1, %d]" % (imb, ranks))
if errors: sys.exit("FAIL: /metrics EP statistics: " + "; ".join(errors))
print("EP statistics: %d exchanges, %d expert rows in total, rank imbalance %g" % (scalar("deepinfer_ep_load_exchanges_total"), s, imb))
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
python3 "$dir/metrics.py" "$dir/port2" "$model" "$np" || exit 1
sleep 11 # idle for more than two 5 s deadlines
python3 "$dir/req.py" "$dir/port2" "$name" >"$dir/mpi2.json" || { echo "FAIL: requests after idling"; cat "$dir/mpi.log"; exit 1; }
for f in mpi1 mpi2; do
    cmp -s "$dir/one.json" "$dir/$f.json" || { echo "FAIL: $f differs from one process"; diff "$dir/one.json" "$dir/$f.json" | head; exit 1; }
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
