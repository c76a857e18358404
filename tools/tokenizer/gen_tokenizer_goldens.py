#!/usr/bin/env python3
"""Writes tests/tokenizer/data/encode_golden.jsonl: for every corpus string, the ids Hugging Face
`tokenizers` (version pinned in requirements.txt) gives with the DeepSeek V4 tokenizer shipped in
data/tokenizer/deepseek-v4/, and its decode.

With the argument `unicode`, writes tests/tokenizer/data/unicode_golden.jsonl from unicode_corpus.py
instead (Unicode 15-17 characters, emoji sequences, every block, whitespace runs), and records the Unicode
version of HF's classes as measured by gen_unicode_tables.py's check.

Run through tools/tokenizer/run.sh, which creates build/tokenizer-venv with the pinned versions.

Line format (one JSON object per line):
  {"cat": str, "text": str}            valid UTF-8 input
  {"cat": str, "hex": str, "text": str} malformed input: hex of the raw bytes; "text" is the bytes
                                       decoded with U+FFFD replacement, which is what is tokenized
  plus "ids": [int] and, only when decode(ids) != text, "decoded": str.
"""

import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
from corpus import build_corpus  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZER = os.path.join(ROOT, "data", "tokenizer", "deepseek-v4", "tokenizer.json")
OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "encode_golden.jsonl")


def main():
    assert tokenizers.__version__ == "0.23.3", tokenizers.__version__
    tok = Tokenizer.from_file(TOKENIZER)
    out_path = OUT
    header = {"generator": "tools/tokenizer/gen_tokenizer_goldens.py", "tokenizers": tokenizers.__version__,
              "tokenizer_json": "data/tokenizer/deepseek-v4/tokenizer.json"}
    if len(sys.argv) > 1 and sys.argv[1] == "unicode":
        import unicodedata2
        from unicode_corpus import build_unicode_corpus
        corpus = [(cat, s.encode("utf-8")) for cat, s in build_unicode_corpus()]
        out_path = os.path.join(ROOT, "tests", "tokenizer", "data", "unicode_golden.jsonl")
        # gen_unicode_tables.py proves HF's classes equal this Unicode version's on every code point.
        header["hf_unicode_version"] = unicodedata2.unidata_version
    else:
        corpus = build_corpus()
    header["count"] = len(corpus)
    n = 0
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n")
        for cat, raw in corpus:
            text = raw.decode("utf-8", errors="replace")
            rec = {"cat": cat}
            if text.encode("utf-8") != raw:
                rec["hex"] = raw.hex()
            rec["text"] = text
            ids = tok.encode(text, add_special_tokens=False).ids
            assert ids == tok.encode(text, add_special_tokens=True).ids  # ByteLevel post-processor adds nothing
            rec["ids"] = ids
            dec = tok.decode(ids, skip_special_tokens=False)
            if dec != text:
                rec["decoded"] = dec
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    print(f"wrote {n} cases to {out_path}")


if __name__ == "__main__":
    main()
