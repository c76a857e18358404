#!/usr/bin/env bash
# Creates build/venv-test with the pinned Python packages the server tests drive the server with (the
# official `openai` and `anthropic` clients and `requests`) and validate constrained-decoding samples (`jsonschema`).
# Idempotent: nothing is fetched when the pins are installed.
#   scripts/setup-pytest.sh            -> prints the venv's python path
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/venv-test
mkdir -p build
exec 9>build/.venv-test.lock
flock 9 # ctest may start several Python suites at once; one creates the venv, the others wait
pins=(openai==3.57.0 requests==2.34.2 jsonschema==4.26.0 anthropic==2.10.0)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" - "${pins[@]}" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, pin
PY
then
  "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2
fi
echo "$venv/bin/python"
