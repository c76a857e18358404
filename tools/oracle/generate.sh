#!/usr/bin/env bash
# Regenerate every tiny DeepSeek V4 checkpoint and golden from Hugging Face transformers.
#   tools/oracle/generate.sh                      # creates/uses build/oracle-venv (pip install -r requirements.txt)
#   ORACLE_VENV=/path/to/venv tools/oracle/generate.sh   # use an existing venv with the pinned versions
# Extra arguments are passed to make_tiny_v4.py (e.g. --seed-start N). Output is deterministic.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$("$here/venv.sh")"
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=""
exec "$venv/bin/python" "$here/make_tiny_v4.py" --root "$root" "$@"
