#!/usr/bin/env bash
# Regenerate the tiny DeepSeek checkpoints and goldens from Hugging Face transformers.
#   tools/oracle/generate.sh                      # V4: creates/uses build/oracle-venv (pip install -r requirements.txt)
#   tools/oracle/generate.sh v41                  # V4.1: make_tiny_v41.py; the venv must carry the deepseek_v41
#                                                 # overlay (README "V4.1": the script checks its sha256)
#   ORACLE_VENV=/path/to/venv tools/oracle/generate.sh [v41]   # use an existing venv with the pinned versions
# Extra arguments are passed to the generator (e.g. --seed-start N). Output is deterministic.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$("$here/venv.sh")"
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=""
script=make_tiny_v4.py
if [[ "${1:-}" == "v41" ]]; then
    script=make_tiny_v41.py
    shift
    if [[ ! -f "$("$venv/bin/python" -c 'import transformers, os; print(os.path.dirname(transformers.__file__))')/models/deepseek_v41/modeling_deepseek_v41.py" ]]; then
        echo "generate.sh: $venv has no transformers/models/deepseek_v41 overlay; see tools/oracle/README.md (V4.1)" >&2
        exit 1
    fi
fi
exec "$venv/bin/python" "$here/$script" --root "$root" "$@"
