#!/usr/bin/env python3
"""Writes tests/tokenizer/data/parse_official_golden.json: well-formed DeepSeek V4 completions and what
DeepSeek's own parser (`parse_message_from_completion_text` of the release encoding_dsv4.py, as SGLang 0.5.15
ships it; see gen_chat_goldens.py) returns for them.

Completions are the assistant turns of gen_chat_goldens.py's conversations, rendered by that same encoder
(reasoning + </think> + content + DSML tool calls + EOS), in thinking and chat mode.

Run: tools/tokenizer/run.sh parse-official
"""

import copy
import hashlib
import importlib.util
import json
import os
import sys

sys.argv = sys.argv[:2] + ["release"]  # gen_chat_goldens reads its mode from argv
sys.path.insert(0, os.path.dirname(__file__))
import gen_chat_goldens as g  # noqa: E402

OUT = os.path.join(g.ROOT, "tests", "tokenizer", "data", "parse_official_golden.json")


def main():
    enc = g.load_oracle(sys.argv[1])
    cases = []
    seen = set()
    for name, req in g.CONVERSATIONS.items():
        for i, m in enumerate(req["messages"]):
            if m.get("role") != "assistant" or m.get("wo_eos") or not isinstance(m.get("content", ""), (str, type(None))):
                continue
            m = copy.deepcopy(m)
            if "reasoning" in m:
                m["reasoning_content"] = m.pop("reasoning")
            for mode in ("thinking", "chat"):
                msgs = [{"role": "user", "content": "q"}, m]
                try:
                    prompt = enc.encode_messages(msgs, thinking_mode=mode, drop_thinking=False)
                except Exception:
                    continue
                marker = "<｜Assistant｜>" + ("<think>" if mode == "thinking" else "</think>")
                text = prompt[prompt.rfind(marker) + len(marker):]
                if (text, mode) in seen:
                    continue
                try:
                    parsed = enc.parse_message_from_completion_text(text, thinking_mode=mode)
                except Exception:
                    continue  # the official parser takes only well-formed text
                seen.add((text, mode))
                calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                         for c in parsed["tool_calls"]]
                cases.append({"name": f"{name}#{i}", "mode": mode, "text": text,
                              "reasoning_content": parsed["reasoning_content"], "content": parsed["content"],
                              "tool_calls": calls})
    out = {"generator": "tools/tokenizer/gen_parse_official_goldens.py",
           "oracle": "parse_message_from_completion_text, sglang==0.5.15 wheel: "
                     "sglang/srt/entrypoints/openai/encoding_dsv4.py (DeepSeek's V4 release encoding_dsv4.py)",
           "oracle_sha256": g.RELEASE_SHA256, "cases": cases}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
