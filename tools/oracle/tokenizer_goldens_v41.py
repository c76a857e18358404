#!/usr/bin/env python3
"""Oracle: the tiny-v41 word-level tokenizer's own ids and text for a few strings (HF `tokenizers`).

Writes tests/fixtures/tiny-v41/tokenizer_goldens.json and records it (sha256, versions) in
tests/fixtures/tiny-v41/manifest.json under "tokenizer_goldens" (and in its "files"). make_tiny_v41.py calls
`write_goldens` too, so a full regeneration writes the same file. Standalone (no model, seconds):
    ORACLE_VENV=/work/venvs/oracle; $ORACLE_VENV/bin/python tools/oracle/tokenizer_goldens_v41.py
The tokenizer is models/tiny-v41/tokenizer.json as written by make_tiny_v41.py (WordLevel + WhitespaceSplit,
no normalizer, no decoder). Every encoding is also checked equal to transformers' AutoTokenizer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
from pathlib import Path

import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer

# Texts that exercise what the C++ tokenizer must match: words in and out of the vocabulary, the case /
# accent / ligature / full-width variants (distinct ids: the *Engram* normalization merges them, the
# tokenizer does not), every ASCII and some Unicode whitespace (WhitespaceSplit removes runs of
# char::is_whitespace), added tokens inside and between words (matched on the raw text first), U+FFFD.
TEXTS = [
    "the city of the river",
    "The café and THE CAFÉ were naïve",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nand\x0bvertical\x0cfeed",
    "no\u00a0break\u3000ideographic\u2003em\u2028line\u0085nel",
    "zero\u200bwidth is not whitespace",
    "<s>the city</s>",
    "x<pad>y <unk> <s><s>",
    "ﬁle ﬂow ＡＢＣ Ｄａｔａ ½ 1⁄2 Ⅳ iv IV Straße Ångström",
    "unknown words like zebra and Zürich",
    "\ufffd x\ufffd \ufffdx",
    "0 1 10 75 76 100 007",
    "",
    " \t\n ",
    "the",
]

# Id sequences to decode (the greedy tokens of tiny-v41 prompts look like these): specials in the middle,
# whitespace tokens, out-of-range ids (dropped).
DECODE_IDS = [
    [4, 49, 5, 4, 85],
    [0, 123, 133, 1, 2, 3, 124],
    [173, 174, 175, 176, 177, 4],
    [178, 179, 4, 178],
    [255, 256, 1000, -1, 4],
    [],
    [1],
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Golden prompt used as text end to end (generate --prompt, serve /v1/completions): its ids are all words
# without whitespace, so HF's decode gives a text that encodes back to exactly those ids (checked).
TEXT_PROMPT = 6


def completions(root: Path, tk: Tokenizer) -> list[dict]:
    """The golden greedy tokens of prompt TEXT_PROMPT as text, per checkpoint (from goldens.safetensors)."""
    import safetensors.torch  # only here: the tokenizer part needs no torch
    out = []
    for name in ("tiny-v41", "tiny-v41-fp8"):
        g = safetensors.torch.load_file(str(root / f"tests/fixtures/{name}/goldens.safetensors"))
        ids = g[f"prompt.{TEXT_PROMPT}.ids"].tolist()
        gen = g[f"prompt.{TEXT_PROMPT}.gen_tokens"].tolist()
        text = tk.decode(ids, skip_special_tokens=False)
        assert tk.encode(text).ids == ids, f"golden prompt {TEXT_PROMPT} does not round-trip through text"
        out.append({"model_dir": f"models/{name}", "golden": f"tests/fixtures/{name}/goldens.safetensors",
                    "prompt_index": TEXT_PROMPT, "prompt_text": text, "prompt_ids": ids,
                    "gen_tokens": gen, "gen_text": tk.decode(gen, skip_special_tokens=False),
                    "gen_text_skip_special": tk.decode(gen, skip_special_tokens=True)})
    return out


def compute(tok_json: Path) -> dict:
    tk = Tokenizer.from_file(str(tok_json))
    auto = AutoTokenizer.from_pretrained(str(tok_json.parent))
    enc = []
    for t in TEXTS:
        e = tk.encode(t)  # add_special_tokens=True: the template adds nothing
        assert e.ids == tk.encode(t, add_special_tokens=False).ids, t
        assert e.ids == auto(t)["input_ids"], f"transformers tokenizes {t!r} differently"
        enc.append({"text": t, "ids": e.ids, "tokens": e.tokens,
                    "decoded": tk.decode(e.ids, skip_special_tokens=False),
                    "decoded_skip_special": tk.decode(e.ids, skip_special_tokens=True)})
    dec = []
    for ids in DECODE_IDS:
        valid = [i for i in ids if i >= 0]  # tokenizers takes u32 ids; -1 is dropped as out of range
        dec.append({"ids": ids, "decoded": tk.decode(valid, skip_special_tokens=False),
                    "decoded_skip_special": tk.decode(valid, skip_special_tokens=True)})
    return {"generator": "tools/oracle/tokenizer_goldens_v41.py",
            "tokenizer": "models/tiny-v41/tokenizer.json",
            "tokenizer_sha256": sha256(tok_json),
            "reference": "tokenizers.Tokenizer.from_file(...).encode(text) / .decode(ids, skip_special_tokens)",
            "note": "ids < 0 in 'decode' are passed to tokenizers without them (it takes u32 ids)",
            "encode": enc, "decode": dec, "completion": completions(tok_json.parents[2], tk)}


def versions() -> dict:
    return {"python": platform.python_version(), "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__}


def write_goldens(root: Path) -> Path:
    out = root / "tests/fixtures/tiny-v41/tokenizer_goldens.json"
    data = compute(root / "models/tiny-v41/tokenizer.json")
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return out


def record_in_manifest(root: Path, out: Path) -> None:
    """Adds (or refreshes) the file's entry in "files" and the "tokenizer_goldens" key (last) of the tiny-v41
    manifest. make_tiny_v41.py calls this after writing the manifest, so both paths give the same file."""
    man_path = root / "tests/fixtures/tiny-v41/manifest.json"
    man = json.loads(man_path.read_text())
    files = dict(man.get("files", {}))
    files[str(out.relative_to(root))] = {"bytes": out.stat().st_size, "sha256": sha256(out)}
    man["files"] = dict(sorted(files.items()))
    man.pop("tokenizer_goldens", None)
    man["tokenizer_goldens"] = {"file": str(out.relative_to(root)), "versions": versions(),
                                "command": "$ORACLE_VENV/bin/python tools/oracle/tokenizer_goldens_v41.py"}
    man_path.write_text(json.dumps(man, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    args = ap.parse_args()
    root = Path(args.root)
    out = write_goldens(root)
    record_in_manifest(root, out)
    print(out)


if __name__ == "__main__":
    main()
