#!/usr/bin/env bash
# The Engram gather's cost on a V4.1 checkpoint whose tables exceed RAM (docs/benchmarks.md "V4.1 Engram"):
#   tools/bench/v41_engram.sh prompts [RUNS] [PROMPT_LEN] > prompts.txt
#   deepinfer make-synthetic --preset flash-v41-engram --out DIR --engram-fill-prompts prompts.txt
#   tools/bench/v41_engram.sh BIN DIR [RUNS] [PROMPT_LEN] [GEN]
# DIR holds two ~101 GB sparse tables in which the rows of the benchmark's prompts are written (on disk;
# every other row is a hole that reads as zeros). Per run and mode (--engram-gather on, then off): the
# tables' pages are evicted from the page cache (posix_fadvise DONTNEED on the table files: cold, without
# dropping anybody else's cache), then one `generate --profile` of a PROMPT_LEN-token prompt (default 128)
# that no other run uses and GEN greedy decode steps (batch 1). Prints per run the prefill and decode step
# times, the prefetch worker's gather time and the forward's wait for it, then the medians.
set -euo pipefail
prompt() { # run, mode (0 on, 1 off), length
    python3 -c "print(','.join(str(1000 + ((i * 7919 + ($1 * 2 + $2) * 104729) % 120000)) for i in range($3)))"
}
if [[ "$1" == prompts ]]; then
    for r in $(seq 1 "${2:-3}"); do prompt "$r" 0 "${3:-128}"; prompt "$r" 1 "${3:-128}"; done
    exit 0
fi
bin="$1"; model="$2"; runs="${3:-3}"; plen="${4:-128}"; gen="${5:-8}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
evict() {
    python3 - "$model" <<'PY'
import json, os, sys
d = sys.argv[1]
files = set(v for k, v in json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"].items()
            if ".engram.embed." in k)
for f in files:
    fd = os.open(os.path.join(d, f), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}
# one warm-up so the dense weights are in the page cache for every measured run
python3 -c "print(','.join(str(3 + i) for i in range(16)))" > "$tmp/warm"
"$bin" generate --model "$model" --prompt-ids-file "$tmp/warm" --max-tokens 2 >/dev/null 2>&1
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-4s %-4s %12s %12s %14s %14s %14s %14s\n' run mode prefill_ms decode_ms gather_pf_ms wait_pf_ms \
    gather_dec_ms wait_dec_ms
for r in $(seq 1 "$runs"); do
    for mode in on off; do
        prompt "$r" "$([[ "$mode" == off ]] && echo 1 || echo 0)" "$plen" > "$tmp/p"
        evict
        "$bin" generate --model "$model" --prompt-ids-file "$tmp/p" --max-tokens "$gen" --profile \
            --engram-gather "$mode" > "$tmp/out" 2> "$tmp/err"
        awk -v r="$r" -v mode="$mode" '
            /^profile: prefill/ { ph = "pf"; split($0, a, ", "); split(a[2], b, " "); step["pf"] = b[1] }
            /^profile: decode/  { ph = "dec"; split($0, a, ", "); split(a[2], b, " "); step["dec"] = b[1] }
            $1 == "engram_gather*" { gather[ph] = $3 }
            $1 == "engram_wait" { wait[ph] = $3 }
            END { printf "%-4s %-4s %12.1f %12.1f %14.1f %14.1f %14.1f %14.1f\n", r, mode, step["pf"], step["dec"],
                  gather["pf"], wait["pf"], gather["dec"], wait["dec"] }' "$tmp/err"
    done
done | tee "$tmp/rows"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in on off; do
    awk -v mode="$mode" 'BEGIN { n = 0 } $2 == mode { pf[n] = $3; dec[n] = $4; g[n] = $5; w[n] = $6; gd[n] = $7; wd[n] = $8; n++ }
        function med(a, n,   i, j, t) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                         return a[int(n / 2)] }
        END { printf "median %-3s: prefill %.1f ms, decode %.1f ms/step; gather (worker) %.1f ms prefill, %.1f ms over the decode steps; wait %.1f ms prefill, %.1f ms over the decode steps\n",
              mode, med(pf, n), med(dec, n), med(g, n), med(gd, n), med(w, n), med(wd, n) }' "$tmp/rows"
done
