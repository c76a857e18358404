#!/usr/bin/env bash
# Regenerate every tiny DeepSeek V4 checkpoint and golden from Hugging Face transformers.
#   tools/oracle/generate.sh                      # creates/uses build/oracle-venv (pip install -r requirements.txt)
#   ORACLE_VENV=/path/to/venv tools/oracle/generate.sh   # use an existing venv with the pinned versions
# Extra arguments are passed to make_tiny_v4.py (e.g. --seed-start N). Output is deterministic.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${ORACLE_VENV:-$root/build/oracle-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --upgrade pip
    # PyPI's default torch wheel (it brings CUDA libraries; the oracle only runs on the CPU). Extra pip
    # arguments, e.g. another index, can be passed through ORACLE_PIP_ARGS.
    # shellcheck disable=SC2086
    "$venv/bin/pip" install ${ORACLE_PIP_ARGS:-} -r "$here/requirements.txt"
fi
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=""
exec "$venv/bin/python" "$here/make_tiny_v4.py" --root "$root" "$@"
