#!/usr/bin/env bash
# The README's test command: installs what it needs, builds, and runs the test set CI runs.
#   1. release build: every test (`slow` ones included: they are the whole-workload acceptance runs);
#   2. ASan+UBSan build: every test except `slow`, the format check, and reruns of code the pass already
#      covers at 2-10x the release cost: the server API suite on the text model and the fake backend, the
#      model goldens under forced ISAs, the 4-rank and TCP MPI jobs and the stop/skip fault variants (the
#      2-rank shared-memory jobs and the kill fault test stay; `mpirun generate` token-equality runs and the
#      4-rank serve are covered by the in-process mpi_model_np2 and the 2-rank serve), the structured-output
#      sampling run, the acceptance suite and the real-vocabulary structured suite (~100 s, near its limit,
#      under ASan; the same suite stays on the byte-level model, and the compiler and matcher unit tests stay), the compat / Anthropic
#      suites' reruns on other backends, the 2,000-connection probe, and the hardening probes (RSS limits
#      and CPU bounds mean nothing under ASan). `manual` tests (the full structured acceptance run, 7-20
#      min) run only by hand: ctest -L manual;
#   3. TSan build: the engine's (and server's) unit tests.
# DEEPINFER_TEST_SANITIZERS=0 skips passes 2 and 3 (a quicker local loop).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

status=0
scripts/build.sh release
ctest --preset release -j 2 -LE manual || status=1

if [ "${DEEPINFER_TEST_SANITIZERS:-1}" = "1" ]; then
  scripts/build.sh asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan -LE 'slow|format|manual' \
    -E 'server_py_api_(text|fake)|server_py_hardening|model_goldens_isa_|mpi_collectives_np4|_tcp$|mpi_fault_(stop|skip)|structured_(sampling|validate)|mpi_generate_|mpi_model_np4|mpi_model_v41(fp8)?_np4|mpi_cp_v41(fp8)?_np4|mpi_serve_tp2ep2|server_py_(compat|anthropic)_(text|fake)|server_py_slow_clients|server_py_structured_acceptance|server_py_structured_text' \
    -j 2 || status=1

  tsan_tests=(engine_test engine_tiny_v4)
  [ -f tests/server/CMakeLists.txt ] && tsan_tests+=(server_test)
  [ -f build/tsan/build.ninja ] || cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "${DEEPINFER_BUILD_JOBS:-$(nproc)}" -t "${tsan_tests[@]}"
  regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --preset tsan -R "$regex" -j 2 || status=1
fi
[ $status -eq 0 ] && echo "deepinfer: all test passes succeeded" || echo "deepinfer: SOME TESTS FAILED"
exit $status
