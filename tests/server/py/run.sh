#!/usr/bin/env bash
# ctest entry for the Python server tests: tests/server/py/run.sh api|load|fuzz path/to/deepinfer
# Creates (once) the pinned venv via scripts/setup-pytest.sh, then runs test_<suite>.py with unittest.
# DEEPINFER_TEST_MODEL=DIR serves that model with the real engine; unset, the fake backend is used.
# DEEPINFER_PY_TIMEOUT: seconds before the suite is killed (560).
set -euo pipefail
suite="$1"
bin="$(realpath "$2")"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
py="$("$root/scripts/setup-pytest.sh")"
cd "$here"
# The fake backend is in the test tree's deepinfer-fake binary, beside the build's tests/server.
fake="${DEEPINFER_FAKE_BIN:-$(dirname "$bin")/../../tests/server/deepinfer-fake}"
DEEPINFER_BIN="$bin" DEEPINFER_FAKE_BIN="$(realpath -m "$fake")" exec timeout "${DEEPINFER_PY_TIMEOUT:-560}" "$root/$py" -m unittest -v "test_$suite"
