#!/usr/bin/env python3
"""Encoding throughput: HF `tokenizers` (pinned, requirements.txt) vs deepinfer's native tokenizer on the
same corpus (the golden corpus), on the same machine, in one run. Prints both and the ratio
(native / HF; > 1 means deepinfer is faster). CPU time is used on both sides, since the machines are shared.

  tools/tokenizer/run.sh bench build/release/bench/tokenizer_bench
"""

import json
import os
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def hf_throughput(tok, texts, joined, repeats=5):
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    for t in texts:  # warm-up (fills HF's word cache, as the native bench's warm-up does)
        tok.encode(t, add_special_tokens=False)
    best_per, best_join = float("inf"), float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        for t in texts:
            tok.encode(t, add_special_tokens=False)
        best_per = min(best_per, time.process_time() - c0)
        c0 = time.process_time()
        tok.encode(joined, add_special_tokens=False)
        best_join = min(best_join, time.process_time() - c0)
    return nbytes / best_per, len(joined.encode("utf-8")) / best_join


def native_throughput(binary):
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_filter=BM_EncodeCorpus",
                          "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true"],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            # bytes_per_second is computed on real time; recompute on CPU time.
            bps = b["bytes_per_second"] * b["real_time"] / b["cpu_time"]
            res[b["run_name"]] = bps
    return res["BM_EncodeCorpusPerString"], res["BM_EncodeCorpusJoined"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/release/bench/tokenizer_bench")
    tok = Tokenizer.from_file(os.path.join(ROOT, "data/tokenizer/deepseek-v4/tokenizer.json"))
    texts = []
    with open(os.path.join(ROOT, "tests/tokenizer/data/encode_golden.jsonl"), encoding="utf-8") as f:
        next(f)
        for line in f:
            texts.append(json.loads(line)["text"])
    joined = "".join(t + "\n" for t in texts)
    hf_per, hf_join = hf_throughput(tok, texts, joined)
    nat_per, nat_join = native_throughput(binary)
    mb = 1e6
    print(f"corpus: {len(texts)} strings, {len(joined.encode('utf-8')) / mb:.2f} MB")
    print(f"per-string encode: deepinfer {nat_per / mb:7.2f} MB/s  HF tokenizers {hf_per / mb:7.2f} MB/s  "
          f"ratio {nat_per / hf_per:.2f}")
    print(f"joined encode:     deepinfer {nat_join / mb:7.2f} MB/s  HF tokenizers {hf_join / mb:7.2f} MB/s  "
          f"ratio {nat_join / hf_join:.2f}")


if __name__ == "__main__":
    main()
