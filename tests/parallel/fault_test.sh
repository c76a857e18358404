#!/usr/bin/env bash
# Fault test of the collective watchdog (label `mpi`): a 4-rank job of mpi_fault_probe; one rank (the
# victim, rank 2) is killed with SIGKILL, stopped with SIGSTOP, or enters the wrong collective. Every other
# rank must write an error naming rank 2 and exit within 30 s of the fault. Bounded: the whole job runs
# under `timeout`, and the victim and mpirun are killed on the way out.
#   fault_test.sh MPIRUN PROBE MODE [mpirun transport args...]
set -uo pipefail
mpirun=$1 probe=$2 mode=$3
shift 3
dir=$(mktemp -d)
victim=2
deadline_ms=8000 # margin for a loaded machine; survivors report at ~8 s, the limit is 30 s
limit_s=30

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# orte_enable_recovery: mpirun keeps the job alive when a rank dies, so the survivors' watchdog (not
# mpirun's SIGTERM) is what ends them; that is the path a leader takes to fail its requests cleanly.
timeout -s KILL 90 "$mpirun" --oversubscribe -np 4 --mca orte_enable_recovery 1 "$@" \
    "$probe" --dir "$dir" --deadline-ms "$deadline_ms" --victim "$victim" --mode "$mode" >"$dir/log" 2>&1 &
mpirun_pid=$!

cleanup() {
    if [ -f "$dir/pid.$victim" ]; then kill -CONT "$(cat "$dir/pid.$victim")" 2>/dev/null; kill -9 "$(cat "$dir/pid.$victim")" 2>/dev/null; fi
    kill -9 "$mpirun_pid" 2>/dev/null
    wait "$mpirun_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

for _ in $(seq 1 300); do
    n=$(ls "$dir" | grep -c '^pid\.[0-9]$')
    [ "$n" -eq 4 ] && break
    sleep 0.1
done
if [ "$n" -ne 4 ]; then
    echo "FAIL: only $n of 4 ranks reached the step loop"; cat "$dir/log"; exit 1
fi
victim_pid=$(cat "$dir/pid.$victim")
t0=$(date +%s%N)
case "$mode" in
kill) kill -9 "$victim_pid" ;;
stop) kill -STOP "$victim_pid" ;;
skip) ;; # the probe's victim enters barrier() while the others enter all_reduce_sum()
*) echo "FAIL: unknown mode $mode"; exit 1 ;;
esac

survivors=(0 1 3)
while :; do
    done_n=0
    for r in "${survivors[@]}"; do [ -f "$dir/result.$r" ] && done_n=$((done_n + 1)); done
    [ "$done_n" -eq ${#survivors[@]} ] && break
    elapsed_ms=$((($(date +%s%N) - t0) / 1000000))
    if [ "$elapsed_ms" -gt $((limit_s * 1000)) ]; then
        echo "FAIL: after ${limit_s}s only $done_n of ${#survivors[@]} surviving ranks reported"; cat "$dir/log"; exit 1
    fi
    sleep 0.1
done
elapsed_ms=$((($(date +%s%N) - t0) / 1000000))

status=0
for r in "${survivors[@]}"; do
    line=$(cat "$dir/result.$r")
    echo "$line"
    case "$line" in
    FAILED*"Unavailable"*"rank(s) "*) ;;
    *) echo "FAIL: rank $r did not report an Unavailable error"; status=1 ;;
    esac
    # The leader must name the victim. A follower may instead name the leader when the leader gave up
    # first (it was waiting for the leader's next step): the failure cascades, it never hangs.
    if [ "$r" -eq 0 ]; then
        echo "$line" | grep -Eq "rank\(s\) ([0-9]+,)*$victim(,|[^0-9]|$)" || { echo "FAIL: the leader did not name rank $victim"; status=1; }
    else
        echo "$line" | grep -Eq "rank\(s\) ([0-9]+,)*($victim|0)(,|[^0-9]|$)" || { echo "FAIL: rank $r named neither rank $victim nor the leader"; status=1; }
    fi
done
# Survivors exit (non-zero) on their own: wait for their processes to be gone.
for _ in $(seq 1 100); do
    alive=0
    for r in "${survivors[@]}"; do kill -0 "$(cat "$dir/pid.$r")" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
done
[ $alive -eq 0 ] || { echo "FAIL: a surviving rank is still running after reporting"; status=1; }
if [ "$mode" = skip ]; then
    grep -q "FAILED rank $victim" "$dir/log" || { echo "FAIL: the victim did not report its own timeout"; status=1; }
fi
echo "fault mode '$mode': survivors reported after ${elapsed_ms} ms (deadline ${deadline_ms} ms, limit ${limit_s} s)"
[ $status -eq 0 ] && echo "PASS" || { echo "--- job log"; cat "$dir/log"; }
exit $status
