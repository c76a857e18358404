#!/usr/bin/env python3
"""Writes tests/tokenizer/data/chat_golden.json: DeepSeek V4 prompts rendered by the reference encoder.

Oracle: DeepSeek's encoding_dsv4.py as shipped by vLLM 0.33.0 (vllm/tokenizers/deepseek_v4_encoding.py,
sha256 aa407637bd2e58f20a16f781ea0bc519d06f74bed49deadaecb5aa5756d7230e), extracted from the PyPI wheel
by tools/tokenizer/run.sh chat. Request-level tools are attached to the first system message (one is
synthesized at index 0 if there is none) and modes map to (thinking_mode, reasoning_effort) as vLLM's
DeepSeek V4 tokenizer wrapper does.

Each case: {"name", "mode", "drop_thinking", "request": {"messages": [...], "tools": [...]}, "prompt"}.

With a second argument `release`, the oracle is the V4 *release* encoder (REASONING_EFFORT_MAX table: high
renders nothing, max renders "Absolute maximum ...") as SGLang 0.5.15 ships it
(sglang/srt/entrypoints/openai/encoding_dsv4.py, "Adapted from the DeepSeek-V4 release reference
implementation", sha256 012e4dc2...6fc6c3; it reproduces DeepSeek's 4 official test vectors byte for byte),
and the output is tests/tokenizer/data/chat_golden_release.json. That encoder reads assistant reasoning from
"reasoning_content", rejects reasoning_effort "low" (SGLang filters it to None) and has no image parts.
"""

import copy
import hashlib
import importlib.util
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "chat_golden.json")
ORACLE_SHA256 = "aa407637bd2e58f20a16f781ea0bc519d06f74bed49deadaecb5aa5756d7230e"
RELEASE_SHA256 = "012e4dc254c4046f600674eaa799d59dffe5e4a46450da7b4629cf16706fc6c3"
RELEASE = len(sys.argv) > 2 and sys.argv[2] == "release"

MODES = {
    "non-thinking": ("chat", None),
    "thinking-low": ("thinking", "low"),
    "thinking-high": ("thinking", "high"),
    "thinking-max": ("thinking", "max"),
}


def load_oracle(path):
    data = open(path, "rb").read()
    assert hashlib.sha256(data).hexdigest() == (RELEASE_SHA256 if RELEASE else ORACLE_SHA256), "unexpected oracle file"
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def render(enc, request, mode, drop_thinking, context=0):
    messages = copy.deepcopy(request["messages"])
    for m in messages:  # vLLM's copy reads assistant reasoning from "reasoning", the release "reasoning_content"
        if "reasoning_content" in m and not RELEASE:
            m["reasoning"] = m.pop("reasoning_content")
        if "reasoning" in m and RELEASE:  # deepinfer accepts both keys
            m["reasoning_content"] = m.pop("reasoning")
    tools = request.get("tools")
    if tools:
        idx = next((i for i, m in enumerate(messages) if m.get("role") == "system"), None)
        if idx is None:
            messages.insert(0, {"role": "system"})
            idx = 0
        messages[idx]["tools"] = tools
    thinking_mode, effort = MODES[mode]
    if RELEASE and effort == "low":
        effort = None
    if context:
        return enc.encode_messages(messages[context:], thinking_mode=thinking_mode, context=messages[:context],
                                   drop_thinking=drop_thinking, reasoning_effort=effort)
    return enc.encode_messages(messages, thinking_mode=thinking_mode, drop_thinking=drop_thinking,
                               reasoning_effort=effort)


def tool(name, desc, props, required=None):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required or list(props)}}}


WEATHER = tool("get_weather", "Get the current weather for a city.",
               {"location": {"type": "string", "description": "City name, e.g. 北京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["location"])
SEARCH = tool("web_search", "Search the web and return the top results.",
              {"query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
               "filters": {"type": "object", "properties": {"site": {"type": "string"},
                                                              "recent": {"type": "boolean"}}}}, ["query"])
CALC = tool("calculator", "Evaluate an arithmetic expression. Supports + - * / ** and parentheses.",
            {"expression": {"type": "string"}})
NOARGS = {"type": "function", "function": {"name": "get_time", "description": "Current UTC time.",
                                            "parameters": {"type": "object", "properties": {}}}}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


U = lambda c: {"role": "user", "content": c}  # noqa: E731
S = lambda c: {"role": "system", "content": c}  # noqa: E731
A = lambda c, r=None, tc=None: dict({"role": "assistant", "content": c},  # noqa: E731
                                    **({"reasoning_content": r} if r is not None else {}),
                                    **({"tool_calls": tc} if tc else {}))
T = lambda cid, c: {"role": "tool", "tool_call_id": cid, "content": c}  # noqa: E731

CONVERSATIONS = {
    "single_user": {"messages": [U("Hello!")]},
    "system_user": {"messages": [S("You are a helpful assistant."), U("What is 2+2?")]},
    "multi_turn_reasoning_history": {"messages": [
        S("You are concise."), U("Name a prime."), A("7", "Small primes: 2, 3, 5, 7."), U("Another one?")]},
    "three_rounds": {"messages": [
        U("hi"), A("Hello! How can I help?", "greet"), U("Tell me a joke."),
        A("Why did the chicken cross the road?", "pick a classic"), U("Explain it.")]},
    "developer_user": {"messages": [{"role": "developer", "content": "Answer in French."}, U("Good morning")]},
    "developer_mid_history": {"messages": [
        U("first"), A("ok", "r1"), {"role": "developer", "content": "Be brief."}, U("second")]},
    "tools_no_system": {"tools": [WEATHER], "messages": [U("Weather in Paris?")]},
    "tools_with_system": {"tools": [WEATHER, SEARCH], "messages": [S("You can use tools."), U("北京天气怎么样？")]},
    "tool_loop_pending": {"tools": [WEATHER], "messages": [
        U("Weather in Beijing?"),
        A("", "I should call the weather tool.", [call("call_1", "get_weather", {"location": "Beijing"})]),
        T("call_1", "{\"temp\": 21, \"sky\": \"clear\"}")]},
    "tool_loop_parallel_unordered": {"tools": [WEATHER, SEARCH], "messages": [
        S("Use tools when needed."), U("Compare weather in Tokyo and Oslo, and find news."),
        A("Let me check.", "Two weather calls and a search.", [
            call("c1", "get_weather", {"location": "Tokyo", "unit": "celsius"}),
            call("c2", "get_weather", {"location": "Oslo"}),
            call("c3", "web_search", {"query": "news", "top_k": 3, "filters": {"site": "bbc.com", "recent": True}})]),
        T("c3", "[\"headline 1\", \"headline 2\"]"), T("c1", "Tokyo: 25C"), T("c2", "Oslo: 3C")]},
    "tool_loop_finished_then_new_question": {"tools": [CALC], "messages": [
        U("What is 17*23?"),
        A("", "Use the calculator.", [call("k1", "calculator", {"expression": "17*23"})]),
        T("k1", "391"), A("17 × 23 = 391.", "The tool says 391."), U("And 391/17?")]},
    "tool_result_then_user_text": {"tools": [SEARCH], "messages": [
        U("Search for cats."), A("", "search", [call("s1", "web_search", {"query": "cats"})]),
        T("s1", "Cats are mammals."), U("Also summarize it in one line.")]},
    "consecutive_users": {"messages": [U("part one"), U("part two"), U("part three")]},
    "assistant_content_and_calls": {"tools": [WEATHER], "messages": [
        U("Weather?"), A("Sure, checking now.", None, [call("w", "get_weather", {"location": "Rome"})]),
        T("w", "sunny")]},
    "typed_arguments": {"tools": [SEARCH], "messages": [
        U("typed"), A("", "r", [call("t1", "web_search", {
            "query": "q \"quoted\" \\ back", "top_k": 5, "ratio": 0.25, "big": 12345678901234, "neg": -3,
            "flag": False, "none": None, "list": [1, "two", 3.5, {"x": []}], "obj": {"k": "v", "n": {"m": True}},
            "sci": 1e-07, "large": 1e20, "unicode": "中文 ✓ émoji 👍", "newline": "a\nb\tc"})]),
        T("t1", "ok")]},
    "empty_arguments": {"tools": [NOARGS], "messages": [
        U("time?"), A("", None, [call("n1", "get_time", {})]), T("n1", "2026-01-01T00:00:00Z")]},
    "response_format_system": {"messages": [
        {"role": "system", "content": "Reply in JSON.", "response_format": {
            "type": "json_schema", "json_schema": {"name": "answer", "schema": {
                "type": "object", "properties": {"answer": {"type": "string"}}}}}}, U("Capital of Italy?")]},
    "content_parts_with_image": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "Be detailed."}]}]},
    "latest_reminder": {"messages": [
        S("sys"), U("question"), {"role": "latest_reminder", "content": "Today is Monday."}]},
    "assistant_prefix_wo_eos": {"messages": [
        U("Write a haiku."), {"role": "assistant", "content": "Autumn moon rises", "wo_eos": True}]},
    "task_action": {"messages": [dict(U("Should I search for this?"), task="action")]},
    "task_query": {"messages": [dict(U("best pizza in Naples"), task="query")]},
    "trailing_system": {"messages": [U("hello"), A("hi", "r"), S("Now switch to formal tone.")]},
    "system_then_assistant": {"messages": [S("prefill follows"), A("Certainly.", "ok")]},
    "special_characters": {"messages": [
        S("Quotes \" and backslashes \\ and {braces} and <tags>."),
        U("Multi\nline\n\n  indented\ttab — em dash, emoji 👨‍👩‍👧, Arabic مرحبا, Hindi नमस्ते")]},
    "developer_with_tools": {"messages": [
        {"role": "developer", "content": "You may call tools.", "tools": [CALC]}, U("3^4?")]},
    "tool_content_parts": {"tools": [WEATHER], "messages": [
        U("w?"), A("", "r", [call("p1", "get_weather", {"location": "Lima"})]),
        {"role": "tool", "tool_call_id": "p1", "content": [{"type": "text", "text": "part A"},
                                                             {"type": "text", "text": "part B"}]}]},
    "two_systems_tools_first": {"tools": [SEARCH], "messages": [S("first system"), S("second system"), U("go")]},
    "reasoning_field_alias": {"messages": [
        U("q1"), {"role": "assistant", "content": "a1", "reasoning": "thought via 'reasoning'"}, U("q2")]},
    "empty_user_content": {"messages": [U(""), A("?", "r"), {"role": "user"}]},
    "long_tool_loop_two_steps": {"tools": [SEARCH, CALC], "messages": [
        S("agent"), U("Find population of France and double it."),
        A("", "search first", [call("a", "web_search", {"query": "population of France"})]),
        T("a", "68 million"),
        A("", "now calculate", [call("b", "calculator", {"expression": "68*2"})]),
        T("b", "136")]},
}



def random_conversations(n, seed=7):
    """Seeded random agent-style conversations: mixes of system/developer/user turns, assistant turns with and
    without reasoning, parallel tool calls with typed arguments, tool results in shuffled order."""
    import random
    rng = random.Random(seed)
    texts = ["Hi", "Explain MoE routing.", "写一首诗", "¿Qué hora es?", "Fix this: `x = [1, 2`", "ok",
             "Line1\nLine2", "Use <b>bold</b> & \"quotes\"", "数字 12345 and emoji 🚀", ""]
    tools_pool = [WEATHER, SEARCH, CALC, NOARGS]
    arg_for = {"get_weather": lambda: {"location": rng.choice(["Paris", "東京", "Zürich"])},
               "web_search": lambda: {"query": rng.choice(["llm", "新闻"]), "top_k": rng.randint(1, 9)},
               "calculator": lambda: {"expression": f"{rng.randint(1, 99)}*{rng.randint(1, 99)}"},
               "get_time": lambda: {}}
    out = {}
    for k in range(n):
        req = {"messages": []}
        use_tools = rng.random() < 0.6
        if use_tools:
            req["tools"] = rng.sample(tools_pool, rng.randint(1, 3))
        if rng.random() < 0.6:
            req["messages"].append(S(rng.choice(texts) or "system"))
        for turn in range(rng.randint(1, 3)):
            if rng.random() < 0.15:
                req["messages"].append({"role": "developer", "content": "Follow the house style."})
            req["messages"].append(U(rng.choice(texts)))
            if use_tools and rng.random() < 0.6:
                names = [t["function"]["name"] for t in req["tools"]]
                calls = [call(f"id{k}_{turn}_{i}", nm, arg_for[nm]()) for i, nm in
                         enumerate(rng.choice(names) for _ in range(rng.randint(1, 3)))]
                req["messages"].append(A(rng.choice(["", "Checking."]), rng.choice([None, "plan the calls"]), calls))
                results = [T(c["id"], f"result {c['id']}") for c in calls]
                rng.shuffle(results)
                req["messages"].extend(results)
                if rng.random() < 0.5:
                    req["messages"].append(A(rng.choice(texts) or "done", rng.choice([None, "summarize"])))
            elif turn < 2 and rng.random() < 0.8:
                req["messages"].append(A(rng.choice(texts) or "answer", rng.choice([None, "", "think step"])))
        if req["messages"][-1]["role"] == "assistant" and rng.random() < 0.7:
            req["messages"].append(U("follow-up"))
        out[f"random_{k:02d}"] = req
    return out


CONVERSATIONS.update(random_conversations(40))

DROP_FALSE = ["multi_turn_reasoning_history", "three_rounds", "developer_mid_history", "trailing_system",
              "reasoning_field_alias"]


def main():
    enc = load_oracle(sys.argv[1])
    cases = []
    for name, req in CONVERSATIONS.items():
        for mode in ["non-thinking", "thinking-high", "thinking-max"]:
            cases.append((name, mode, True))
        if name in DROP_FALSE:
            cases.append((name, "thinking-high", False))
        if name in ("single_user", "tool_loop_pending", "multi_turn_reasoning_history"):
            cases.append((name, "thinking-low", True))
    out = {"generator": "tools/tokenizer/gen_chat_goldens.py", "effort_table": "0731",
           "oracle": "vllm==0.33.0 wheel: vllm/tokenizers/deepseek_v4_encoding.py (copy of DeepSeek's encoding_dsv4.py)",
           "oracle_sha256": ORACLE_SHA256, "cases": []}
    out_path = OUT
    if RELEASE:
        out.update({"effort_table": "release", "oracle_sha256": RELEASE_SHA256,
                    "oracle": "sglang==0.5.15 wheel: sglang/srt/entrypoints/openai/encoding_dsv4.py (DeepSeek's V4 "
                              "release encoding_dsv4.py)"})
        out_path = OUT.replace("chat_golden.json", "chat_golden_release.json")
        cases += [(name, "thinking-low", True) for name in CONVERSATIONS
                  if (name, "thinking-low", True) not in cases]
    skipped = 0
    excluded = set()
    for name, mode, drop in cases:
        req = CONVERSATIONS[name]
        msgs = req["messages"]
        if RELEASE and any(m["role"] == "system" and (i + 1 == len(msgs) or msgs[i + 1]["role"] == "assistant")
                           for i, m in enumerate(msgs)):
            # vLLM's copy (and deepinfer) open an assistant turn after a system message that is last or
            # followed by an assistant message; the release encoder does not. Not an effort-table matter.
            excluded.add(name)
            continue
        try:
            prompt = render(enc, req, mode, drop)
        except Exception as e:  # the release encoder lacks a feature vLLM's copy added (image parts)
            assert RELEASE, e
            skipped += 1
            continue
        out["cases"].append({"name": name, "mode": mode, "drop_thinking": drop, "request": req, "prompt": prompt})
    if RELEASE:
        # encode_messages(context=...): the first k messages are an already-encoded prefix.
        n_context = 0
        for name, req in CONVERSATIONS.items():
            msgs = req["messages"]
            if name in excluded or req.get("tools") or len(msgs) < 3:
                continue
            for k in sorted({len(msgs) // 2, len(msgs) - 1}):
                for mode in ("non-thinking", "thinking-max"):
                    try:
                        prompt = render(enc, req, mode, True, context=k)
                    except Exception:
                        continue
                    out["cases"].append({"name": name, "mode": mode, "drop_thinking": True, "context_messages": k,
                                         "request": req, "prompt": prompt})
                    n_context += 1
        print(f"{n_context} renders with context")
    if excluded:
        out["excluded"] = {"conversations": sorted(excluded), "reason": "trailing system message / system "
                           "followed by assistant: rendered differently by vLLM's copy (deepinfer follows it)"}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out['cases'])} cases ({len(CONVERSATIONS)} conversations, {skipped} skipped) to {out_path}")


if __name__ == "__main__":
    main()
