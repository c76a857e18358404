#!/usr/bin/env python3
"""Smoke test: `deepinfer serve --model models/tiny-v41` answers a text completion through the word-level
tokenizer with the golden greedy tokens as text (tests/fixtures/tiny-v41/tokenizer_goldens.json
"completion", from tools/oracle), streamed and not, and /tokenize agrees with HF's ids.
Usage: serve_tiny_v41.py DEEPINFER_BIN SOURCE_DIR. Standard library only; binds 127.0.0.1."""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read().decode()


def main():
    binary, src = sys.argv[1], sys.argv[2]
    goldens = json.load(open(os.path.join(src, "tests/fixtures/tiny-v41/tokenizer_goldens.json"),
                             encoding="utf-8"))
    case = next(c for c in goldens["completion"] if c["model_dir"] == "models/tiny-v41")
    n = len(case["gen_tokens"])
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        log = open(os.path.join(tmp, "log"), "w+")
        proc = subprocess.Popen([binary, "serve", "--model", os.path.join(src, case["model_dir"]), "--host",
                                 "127.0.0.1", "--port", "0", "--port-file", port_file, "--num-kv-blocks", "64"],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            port = None
            for _ in range(600):
                if proc.poll() is not None:
                    break
                if os.path.exists(port_file) and open(port_file).read().strip():
                    port = int(open(port_file).read().strip())
                    break
                time.sleep(0.1)
            if port is None:
                log.seek(0)
                sys.exit("server did not start:\n" + log.read())
            body = {"model": "tiny-v41", "prompt": case["prompt_text"], "max_tokens": n, "temperature": 0}
            r = json.loads(post(port, "/v1/completions", body))
            got = r["choices"][0]["text"]
            want = case["gen_text_skip_special"]
            assert got == want, f"completion text\n got: {got!r}\nwant: {want!r}"
            assert r["usage"]["prompt_tokens"] == len(case["prompt_ids"]), r["usage"]
            assert r["usage"]["completion_tokens"] == n, r["usage"]
            # Streamed: the deltas concatenate to the same text (separators included).
            stream = post(port, "/v1/completions", dict(body, stream=True))
            deltas = [json.loads(line[6:])["choices"][0]["text"] for line in stream.splitlines()
                      if line.startswith("data: {")]
            assert "".join(deltas) == want, f"streamed text\n got: {''.join(deltas)!r}\nwant: {want!r}"
            print(f"ok: {case['prompt_text']!r} -> {got!r}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
