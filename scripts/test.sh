#!/usr/bin/env bash
# The README's test command: installs what it needs, builds, and runs the test set CI runs.
#   scripts/test.sh            release build: every test except those labelled slow;
#                              then the ASan+UBSan build of the same tests.
#   DEEPINFER_TEST_SANITIZERS=0 scripts/test.sh   skips the sanitizer pass (quicker local loop).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

status=0
scripts/build.sh release
ctest --preset release -LE slow -j 2 || status=1

if [ "${DEEPINFER_TEST_SANITIZERS:-1}" = "1" ]; then
  scripts/build.sh asan
  # The sanitizer pass skips the formatting check (already run) and slow tests.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan -LE 'slow|format' -j 2 || status=1
fi
exit $status
