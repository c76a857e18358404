#!/usr/bin/env bash
# Decode tok/s of 2 ranks x 1 thread (`mpirun -np 2 deepinfer bench --ep 2` and `--tp 2`) against 1 process
# x 2 threads on the same checkpoint (issue 11's target: >= 0.9x), with the bytes rank 0 sends per decode
# step and every rank's peak RSS (docs/benchmarks.md, "Multi-process decode"). The machine is shared, so
# the three configurations run interleaved, ROUNDS times, in a rotating order, each with the load average
# it started under; the summary is the median per configuration and the ratio of medians (per-round ratios
# too: a noisy round shows up there).
#   tools/bench/mpi_decode.sh [DEEPINFER] [MODEL_DIR] [ROUNDS] [GEN]
# defaults: build/release/src/cli/deepinfer, /work/peerw/flash2-fp8, 3 rounds, 16 decode steps
set -euo pipefail
deepinfer=${1:-build/release/src/cli/deepinfer}
model=${2:-/work/peerw/flash2-fp8}
rounds=${3:-3}
gen=${4:-16}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
bench=(bench --model "$model" --prompt-len 8 --gen "$gen" --batch 1 --repeats 3 --bw-mb 256 --json)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # NAME ROUND: one bench run; appends "name round load tok/s bytes/step rss0 rss1" to $tmp/rows
    local name=$1 round=$2 load
    load=$(cut -d' ' -f1 /proc/loadavg)
    case "$name" in
    1x2) "$deepinfer" "${bench[@]}" --threads 2 >"$tmp/out" 2>"$tmp/err" ;;
    ep2) "${mpi[@]}" "$deepinfer" "${bench[@]}" --threads 1 --ep 2 >"$tmp/out" 2>"$tmp/err" ;;
    tp2) "${mpi[@]}" "$deepinfer" "${bench[@]}" --threads 1 --tp 2 >"$tmp/out" 2>"$tmp/err" ;;
    esac || { echo "$name failed:"; cat "$tmp/err"; exit 1; }
    python3 - "$name" "$round" "$load" "$tmp/out" "$tmp/err" >>"$tmp/rows" <<'PY'
import json, re, sys
name, rnd, load, out, err = sys.argv[1:6]
j = json.loads([l for l in open(out) if l.startswith("{")][-1])
rss1 = re.findall(r"rank 1: peak RSS ([0-9.]+) MiB", open(err).read())
print(name, rnd, load, "%.3f" % j["decode_tok_s"], "%.0f" % j["decode_bytes_sent_per_step_rank0"],
      "%.0f" % j["peak_rss_mib_rank0"], rss1[0] if rss1 else "-")
PY
    tail -n 1 "$tmp/rows"
}

echo "# name round load1 decode_tok_s bytes_sent_per_step_rank0 peak_rss_mib_rank0 peak_rss_mib_rank1"
configs=(1x2 ep2 tp2)
for r in $(seq 1 "$rounds"); do
    for i in 0 1 2; do run "${configs[$(( (i + r - 1) % 3 ))]}" "$r"; done
done
python3 - "$tmp/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for name, rnd, load, tps, sent, rss0, rss1 in rows:
    by.setdefault(name, {})[rnd] = (float(tps), sent, rss0, rss1, float(load))
base = statistics.median(v[0] for v in by["1x2"].values())
print("\nsummary (median of %d rounds; load average %s..%s):" % (len(by["1x2"]),
      min(r[2] for r in rows), max(r[2] for r in rows)))
for name in ("1x2", "ep2", "tp2"):
    v = by[name]
    med = statistics.median(x[0] for x in v.values())
    per = ", ".join("%.2f" % (v[r][0] / by["1x2"][r][0]) for r in sorted(v))
    some = next(iter(v.values()))
    print("  %-4s %8.3f tok/s  ratio vs 1x2 %.2f (per round: %s)  bytes/step rank 0: %s  peak RSS MiB: %s %s"
          % (name, med, med / base, per, some[1], some[2], some[3] if name != "1x2" else ""))
PY
