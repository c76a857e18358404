"""Engram hash data for `deepinfer make-synthetic`'s V4.1 presets (src/model/deepseek_v41/synthetic.cpp).

Each preset uses the real DeepSeek V4 tokenizer (data/tokenizer/deepseek-v4) with Engram fields of its own
(layer ids, n-gram size, heads, engram_vocab_size), so its hash data differs from the released Flash data
(data/engram/deepseek-v41-flash). It is computed here by the reference itself (transformers'
`DeepseekV41NgramHashState`, the overlay of tools/oracle/README.md "V4.1"): exact int64, nothing ported.
The Engram fields below must equal the C++ presets' (make-synthetic fails to load otherwise: the hasher
checks every field against config.json and names the one that differs).

    $(tools/oracle/venv.sh)/bin/python tools/oracle/make_engram_hash.py
writes data/engram/<preset>/engram_hash.safetensors and manifest.json for every preset.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from transformers import PreTrainedTokenizerFast
from transformers.models.deepseek_v41 import configuration_deepseek_v41 as cdv41
from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mdv41

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_v41 import check_overlay, engram_data, save_engram, sha256, versions  # noqa: E402

# preset -> Engram fields (the C++ presets' values; engram_num_embeddings follows from the primes)
PRESETS = {
    "tiny-text-v41": dict(engram_layer_ids=[1, 3], engram_max_ngram_size=3, engram_vocab_size=1000,
                          engram_n_heads=2, engram_head_dim=32),
    # V4.1-Flash's Engram fields (table rows 384006168 / 384016682, as released) at layers 1 and 3 of the
    # 4-layer Flash-shaped preset: only the layer-seeded multipliers differ from the released data.
    "flash-v41-engram": dict(engram_layer_ids=[1, 3], engram_max_ngram_size=4, engram_vocab_size=16000000,
                             engram_n_heads=8, engram_head_dim=256),
}
VOCAB, CVS, PAD = 129280, 99092, 2


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    overlay = check_overlay()
    tok_json = root / "data/tokenizer/deepseek-v4/tokenizer.json"
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tok_json))
    for name, fields in PRESETS.items():
        base = dict(vocab_size=VOCAB, engram_pad_id=PAD, engram_compressed_vocab_size=CVS, **fields)
        layout = mdv41.EngramLayout.from_config(cdv41.DeepseekV41TextConfig(
            **base, engram_num_embeddings=[0] * len(fields["engram_layer_ids"])))
        rows = [sum(p for per in lay for p in per) for lay in layout.primes]
        cfg = cdv41.DeepseekV41TextConfig(**base, engram_num_embeddings=rows)
        tensors, meta = engram_data(cfg, tok, tok_json)
        out = root / "data/engram" / name
        save_engram(tensors, meta, out / "engram_hash.safetensors")
        manifest = {"generator": "tools/oracle/make_engram_hash.py", "versions": versions(), "overlay": overlay,
                    "preset": name, "tokenizer": "data/tokenizer/deepseek-v4/tokenizer.json", **meta,
                    "files": {f"data/engram/{name}/engram_hash.safetensors":
                              {"bytes": (out / "engram_hash.safetensors").stat().st_size,
                               "sha256": sha256(out / "engram_hash.safetensors")}}}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"{name}: rows {rows}")


if __name__ == "__main__":
    main()
