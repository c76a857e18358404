#!/usr/bin/env bash
# Prints the path of the oracle's Python venv, creating it first when it does not exist:
#   $ORACLE_VENV when set (an existing venv with the pinned versions), else build/oracle-venv in this
#   checkout, made with `pip install -r tools/oracle/requirements.txt` (PyPI's default torch wheel; the
#   oracle and the transformers peer only run on the CPU). Extra pip arguments: ORACLE_PIP_ARGS.
# Used by tools/oracle/generate.sh and tools/bench/compare.sh, so neither names a machine's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${ORACLE_VENV:-$root/build/oracle-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    echo "oracle venv: creating $venv (pip install -r tools/oracle/requirements.txt)" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --upgrade pip >&2
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q ${ORACLE_PIP_ARGS:-} -r "$here/requirements.txt" >&2
fi
echo "$venv"
