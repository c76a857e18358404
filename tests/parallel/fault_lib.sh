# Shared by generate_fault_test.sh and serve_fault_test.sh (sourced, not run): start a 2-rank deepinfer job
# under mpirun with recovery on, find its ranks, inject the fault into the follower, wait for the leader to
# exit, read the leader's exit status, and clean up whatever is left. The caller sets `dir` (a scratch
# directory) before sourcing and may add process ids to `extra_pids` to be killed on the way out.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export DI_FAULT_TEST_DIR=$dir
mpirun_pid=""
leader=""
follower=""
extra_pids=()

# start_job MPIRUN [mpirun args...] -- DEEPINFER ARGS...: runs in the background under a 120 s `timeout`;
# each rank's exit status lands in $dir/rc.RANK (mpirun's own status does not tell, with recovery enabled).
# Redirect the call's output as the job's output.
start_job() {
    local mpirun=$1 margs=()
    shift
    while [ "$1" != "--" ]; do margs+=("$1"); shift; done
    shift
    timeout -s KILL 120 "$mpirun" --oversubscribe -np 2 --mca orte_enable_recovery 1 "${margs[@]}" \
        sh -c '"$0" "$@"; echo $? >"$DI_FAULT_TEST_DIR/rc.$OMPI_COMM_WORLD_RANK"' "$@" &
    mpirun_pid=$!
}

cleanup() {
    if [ -n "$follower" ]; then kill -CONT "$follower" 2>/dev/null; kill -9 "$follower" 2>/dev/null; fi
    local p
    for p in "${extra_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    [ -n "$mpirun_pid" ] && kill -9 "$mpirun_pid" 2>/dev/null
    wait 2>/dev/null
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

# find_ranks TRIES: sets leader and follower (0.1 s per try); false if either is missing.
find_ranks() {
    local _
    for _ in $(seq 1 "$1"); do
        leader=$(rank_pid 0)
        follower=$(rank_pid 1)
        [ -n "$leader" ] && [ -n "$follower" ] && return 0
        sleep 0.1
    done
    return 1
}

# fault_and_wait MODE(kill|stop) LOG: injects the fault into the follower and waits for the leader to exit;
# sets elapsed_ms (fault to exit) and rc (the leader's exit status, or "missing"). Exits the test with a
# FAIL if the leader still runs 45 s after the fault.
fault_and_wait() {
    local t0 _
    t0=$(date +%s%N)
    case "$1" in
    kill) kill -9 "$follower" ;;
    stop) kill -STOP "$follower" ;;
    *) echo "unknown mode $1"; exit 2 ;;
    esac
    while alive "$leader"; do
        if [ $((($(date +%s%N) - t0) / 1000000000)) -ge 45 ]; then
            echo "FAIL: the leader still runs 45 s after the fault"; cat "$2"; exit 1
        fi
        sleep 0.1
    done
    elapsed_ms=$((($(date +%s%N) - t0) / 1000000))
    for _ in $(seq 1 50); do [ -s "$dir/rc.0" ] && break; sleep 0.1; done # the wrapper writes it after the exit
    rc=$(cat "$dir/rc.0" 2>/dev/null || echo missing)
    echo "leader exited ${elapsed_ms} ms after the fault with status $rc"
}

# check_leader_exit LIMIT_S LOG ERROR_PATTERN: the common verdicts; prints FAILs, returns their count > 0.
check_leader_exit() {
    local f=0
    [ "$elapsed_ms" -le $(($1 * 1000)) ] || { echo "FAIL: more than $1 s"; f=1; }
    [ "$rc" != "0" ] && [ "$rc" != "missing" ] || { echo "FAIL: leader exit status $rc"; f=1; }
    grep -q "$3" "$2" || { echo "FAIL: no '$3' error in the log"; f=1; }
    grep -q "rank(s) 1\|rank 1" "$2" || { echo "FAIL: the error does not name rank 1"; f=1; }
    return $f
}
