"""DeepSeek V4.1 served end to end with the real V4 tokenizer: DEEPINFER_TEST_MODEL is make-synthetic's
tiny-text-v41 (every V4.1 feature, Engram hash data computed by the reference for the V4 tokenizer). Text in,
text out through /v1/completions and /v1/chat/completions, greedy: the same request gives the same text,
and the engine's tokens equal `deepinfer generate`'s direct single-sequence path."""

import json
import os
import subprocess
import unittest

import requests

from common import BIN, MODEL_DIR, Server

PROMPT = "The capital of France is Paris. The capital of Italy is"


def complete(s, prompt, n):
    r = requests.post(s.url("/v1/completions"), timeout=120,
                      json={"model": s.model, "prompt": prompt, "max_tokens": n, "temperature": 0,
                            "ignore_eos": True})
    r.raise_for_status()
    return r.json()


@unittest.skipUnless(MODEL_DIR and os.path.exists(os.path.join(MODEL_DIR, "engram_hash.safetensors")),
                     "needs a V4.1 model (DEEPINFER_TEST_MODEL=tiny-text-v41)")
class V41Text(unittest.TestCase):
    def test_completions_are_greedy_text_and_match_generate(self):
        direct = subprocess.run([BIN, "generate", "--model", MODEL_DIR, "--prompt", PROMPT, "--max-tokens", "8"],
                                check=True, capture_output=True, text=True).stdout.splitlines()
        with Server() as s:
            a = complete(s, PROMPT, 8)
            b = complete(s, PROMPT, 8)
            self.assertEqual(a["usage"]["completion_tokens"], 8)
            text = a["choices"][0]["text"]
            self.assertIsInstance(text, str)
            self.assertEqual(text, b["choices"][0]["text"])
            # generate prints the ids, then the decoded text
            self.assertEqual(text, direct[1] if len(direct) > 1 else "")
            r = requests.post(s.url("/v1/chat/completions"), timeout=120,
                              json={"model": s.model, "max_tokens": 6, "temperature": 0,
                                    "messages": [{"role": "user", "content": "Hello, who are you?"}]})
            r.raise_for_status()
            chat = r.json()
            self.assertIn("content", chat["choices"][0]["message"])
            self.assertGreaterEqual(chat["usage"]["prompt_tokens"], 5)


if __name__ == "__main__":
    unittest.main()
