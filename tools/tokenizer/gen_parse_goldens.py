#!/usr/bin/env python3
"""Writes tests/tokenizer/data/parse_golden.json: DeepSeek V4 model outputs and how DeepSeek's own stream
processor (PyPI deepseek-recipe==0.2.0, Chat Completions generator) parses them: reasoning_content,
content, tool calls (name + arguments JSON text), finish_reason.

Each case is also run through the reference in 1- and 7-character pieces to check the reference itself is
split-independent. Two documented deviations (docs/tokenizer.md) are recorded per case:
  - "ascii_pipes": the text spells |DSML| with ASCII pipes; the reference sees it canonicalized to ｜DSML｜.
  - "no_think_end": thinking mode, no </think>, normal stop, no tool call: the reference files everything
    under reasoning; we deliver it as content (expected = reference reasoning moved to content).
"""

import json
import os

from deepseek_recipe import (ChatCompletionRequest, ChatCompletionResponse, ConversionOptions, InferenceChunk,
                             InferenceFinishReason, StreamProcessor)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "parse_golden.json")
D = "｜DSML｜"
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
         for n in ("get_weather", "web_search", "calculator", "get_time")]


def reference(text, thinking, finish, pieces):
    body = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "tools": TOOLS}
    conv = ChatCompletionRequest(body).convert(ConversionOptions().with_default_thinking_mode(thinking))
    sp = StreamProcessor(ChatCompletionRequest.chunk_generator(conv, "id", "m"), conv.parsing_options)
    out = list(sp.push(InferenceChunk.ready()))
    chunks = [text] if pieces == 0 else [text[i:i + pieces] for i in range(0, len(text), pieces)]
    for c in chunks:
        out += sp.push(InferenceChunk.text(c, 1))
    out += sp.push(InferenceChunk.finish(getattr(InferenceFinishReason, finish.capitalize())))
    out += sp.finish()
    resp = ChatCompletionResponse("id", "m", 0, 0, 0)
    for c in out:
        resp.accumulate(c)
    choice = json.loads(resp.to_json())["choices"][0]
    msg = choice["message"]
    return {"reasoning": msg.get("reasoning_content") or "", "content": msg.get("content") or "",
            "tool_calls": [{"name": t["function"]["name"], "arguments": t["function"]["arguments"]}
                           for t in (msg.get("tool_calls") or [])],
            "finish_reason": choice["finish_reason"]}


def inv(name, *params):
    body = "\n".join(f'<{D}parameter name="{k}" string="{s}">{v}</{D}parameter>' for k, s, v in params)
    return f'<{D}invoke name="{name}">\n{body}\n</{D}invoke>'


def block(*invokes):
    return f"<{D}tool_calls>\n" + "\n".join(invokes) + f"\n</{D}tool_calls>"


W = inv("get_weather", ("location", "true", "Beijing"), ("days", "false", "3"))
S = inv("web_search", ("query", "true", 'say "hi" \\ there\nnext'), ("top_k", "false", "5"),
        ("filters", "false", '{"site": "example.com", "recent": true}'))
C = inv("calculator", ("expression", "true", "2 ** 10"))
FULL = "Let me check the weather.</think>\n\n" + block(W)

CASES = [
    ("answer_after_reasoning", "I think 2+2=4.</think>The answer is 4.", True, "stop"),
    ("newlines_around_reasoning", "\n\nStep 1.\n\nStep 2.\n\n</think>\n\nAnswer.\n\n", True, "stop"),
    ("spaces_kept", " \n r \n</think> \n A", True, "stop"),
    ("crlf", "\r\nreason\r\n</think>\r\nAnswer\r\n", True, "stop"),
    ("empty_reasoning", "</think>Just the answer.", True, "stop"),
    ("empty_output_thinking", "", True, "stop"),
    ("non_thinking_plain", "\n\nHello there!\n", False, "stop"),
    ("non_thinking_stray_think_end", "Answer</think> continues", False, "stop"),
    ("non_thinking_think_tags", "<think>r</think>ans", False, "stop"),
    ("double_think_end", "r1</think>A</think>B", True, "stop"),
    ("think_tag_in_content", "r</think>A<think>B</think>C", True, "stop"),
    ("cjk_and_emoji", "让我想想 🤔</think>答案是四。👍", True, "stop"),
    ("single_tool_call", FULL, True, "stop"),
    ("content_before_call", "Plan.</think>Sure, checking.\n\n" + block(W), True, "stop"),
    ("content_space_before_call", "Plan.</think>Sure. \n\n" + block(W), True, "stop"),
    ("parallel_calls", "Two calls.</think>" + block(W, S, C), True, "stop"),
    ("typed_and_escaped_args", "x</think>" + block(S), True, "stop"),
    ("raw_non_string_values", "x</think>" + block(inv("get_weather", ("a", "false", "abc"), ("b", "false", "  7  "),
                                                     ("c", "false", '{"x": 1.50}'))), True, "stop"),
    ("empty_invoke", "x</think>" + block(f'<{D}invoke name="get_time">\n\n</{D}invoke>'), True, "stop"),
    ("empty_string_param", "x</think>" + block(inv("get_weather", ("location", "true", ""))), True, "stop"),
    ("unicode_param", "x</think>" + block(inv("web_search", ("query", "true", "北京 天气 ☀️"))), True, "stop"),
    ("compact_dsml", f'x</think><{D}tool_calls><{D}invoke name="calculator"><{D}parameter name="expression" '
                     f'string="true">1+1</{D}parameter></{D}invoke></{D}tool_calls>', True, "stop"),
    ("spacey_dsml", f'x</think><{D}tool_calls>\n\n  <{D}invoke name="calculator">  \n\n<{D}parameter '
                    f'name="expression" string="true">1+1</{D}parameter>\n\n</{D}invoke>  \n</{D}tool_calls>',
     True, "stop"),
    ("call_inside_reasoning", "I will call it now " + block(W), True, "stop"),
    ("bare_invoke", "Checking.</think>" + W, True, "stop"),
    ("bare_invoke_non_thinking", "Checking. " + W, False, "stop"),
    ("non_thinking_call", "On it.\n\n" + block(W), False, "stop"),
    ("text_after_block_dropped", FULL + "\n\nTrailing chatter.", True, "stop"),
    ("second_block_dropped", "x</think>" + block(W) + "\n\n" + block(C), True, "stop"),
    ("ascii_pipes", "x</think>" + block(W).replace("｜", "|"), True, "stop"),
    ("ascii_pipes_bare_invoke", "x</think>" + W.replace("｜", "|"), True, "stop"),
    ("mixed_pipes", "x</think>" + block(W).replace("<｜DSML｜invoke", "<|DSML|invoke"), True, "stop"),
    ("no_think_end_stop", "The capital of France is Paris.", True, "stop"),
    ("no_think_end_multiline", "\n\nLine one.\nLine two.\n", True, "stop"),
    ("no_think_end_length", "Still reasoning about the problem and", True, "length"),
    ("cut_in_reasoning_marker", "reasoning </thi", True, "length"),
    ("cut_partial_marker_stop", "r</think>text ends <｜DS", True, "stop"),
    ("cut_partial_marker_length", "r</think>text ends <｜DSML｜tool_ca", True, "length"),
    ("cut_in_invoke_name", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_wea', True, "length"),
    ("cut_after_invoke_name", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n', True, "length"),
    ("cut_in_param_name", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n<{D}parameter name="loc',
     True, "length"),
    ("cut_in_param_attrs", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n<{D}parameter '
                                         f'name="location" str', True, "length"),
    ("cut_in_string_value", "r</think>" + W[:W.index("Beijing") + 3], True, "length"),
    ("cut_in_raw_value", "r</think>" + block(W)[:block(W).index('">3') + 3], True, "length"),
    ("cut_in_param_close", "r</think>" + block(W)[:block(W).index("Beijing") + 12], True, "length"),
    ("cut_after_param", "r</think>" + block(W)[:block(W).index("Beijing") + 26], True, "length"),
    ("cut_after_invoke", "r</think>" + block(W)[:-len(f"\n</{D}tool_calls>")], True, "length"),
    ("cut_second_call", "r</think>" + block(W, C)[:-30], True, "length"),
    ("stop_inside_block", "r</think>" + block(W)[:-5], True, "stop"),
    ("stop_after_invoke", "r</think>" + block(W)[:-len(f"\n</{D}tool_calls>")], True, "stop"),
    ("stop_in_string_value", "r</think>" + W[:W.index("Beijing") + 3], True, "stop"),
    ("stop_in_param_name", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n<{D}parameter name="loc',
     True, "stop"),
    ("stop_in_invoke_name", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_wea', True, "stop"),
    ("stop_after_invoke_name", "r</think>" + f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n', True, "stop"),
    ("stop_in_raw_value", "r</think>" + block(W)[:block(W).index('">3') + 3], True, "stop"),
    ("cut_newlines_before_block", "r</think>Text\n\n<｜DSML｜tool", True, "length"),
    ("special_tokens_in_content", "r</think>hello <tool_result>x</tool_result> <｜end▁of▁sentence｜>", True, "stop"),
    ("dsml_lookalike_text", "r</think>Use <DSML> or ｜DSML｜ or <｜DSML｜other> freely.", True, "stop"),
]


def main():
    out = {"generator": "tools/tokenizer/gen_parse_goldens.py", "reference": "deepseek-recipe==0.2.0 StreamProcessor",
           "cases": []}
    for name, text, thinking, finish in CASES:
        ascii_pipes = "|DSML|" in text
        oracle_text = text.replace("|DSML|", D) if ascii_pipes else text
        ref = reference(oracle_text, thinking, finish, 0)
        for pieces in (1, 7):
            assert reference(oracle_text, thinking, finish, pieces) == ref, (name, pieces)
        expected = dict(ref)
        deviations = []
        if ascii_pipes:
            deviations.append("ascii_pipes")
        if thinking and "</think>" not in text and finish == "stop" and not ref["tool_calls"]:
            deviations.append("no_think_end")
            expected["content"] = ref["reasoning"] + ref["content"]
            expected["reasoning"] = ""
        out["cases"].append({"name": name, "text": text, "thinking": thinking, "finish": finish,
                             "reference": ref, "expected": expected, "deviations": deviations})
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out['cases'])} cases to {OUT}")


if __name__ == "__main__":
    main()
