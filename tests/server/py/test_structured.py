"""Structured outputs through the OpenAI API on the real engine (random weights, real vocabulary): response_format
json_schema / json_object, vLLM's guided_* and structured_outputs fields, forced tool calls. The random model
writes endless strings, yet the engine's budget rule closes every output before max_tokens: every output must
finish ("stop" / "tool_calls") and validate. Runs only when DEEPINFER_TEST_MODEL is set (the fake backend ignores
constraints)."""

import concurrent.futures
import json
import os
import re
import unittest

import jsonschema
import openai
import requests

from common import MODEL_DIR, Server

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "structured", "data")

SCHEMAS = ["001_person", "012_comment_thread", "021_sensor_reading", "044_geo_point", "062_linked_list",
           "083_type_union", "089_definitions_draft7", "093_enum_mixed_types", "097_array_bounds",
           "099_patterns_unanchored", "107_moderation"]

def tool(name, properties, required):
    return {"type": "function", "function": {"name": name, "description": "Tool " + name, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


# Bounded strings: the random model would otherwise write until max_tokens.
TOOLSETS = {
    "weather": [tool("get_weather", {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"enum": ["c", "f"]}, "days": {"type": "integer", "minimum": 1,
                                                                            "maximum": 7}}, ["city"])],
    "calendar": [tool("create_event", {"title": {"type": "string", "maxLength": 10},
                                       "attendees": {"type": "array", "maxItems": 2,
                                                     "items": {"type": "string", "maxLength": 8}},
                                       "slot": {"type": "object", "properties": {
                                           "hour": {"type": "integer", "minimum": 0, "maximum": 23},
                                           "allday": {"type": "boolean"}}, "required": ["hour"],
                                           "additionalProperties": False}}, ["title", "slot"]),
                 tool("delete_event", {"id": {"type": "string", "pattern": "^ev[0-9]{3}$"}}, ["id"])],
    "shop": [tool("search", {"query": {"type": "string", "maxLength": 15},
                             "max_price": {"type": ["number", "null"]}}, ["query"]),
             tool("add_to_cart", {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
                                  "qty": {"type": "integer", "minimum": 1, "maximum": 9}}, ["sku", "qty"]),
             tool("checkout", {}, [])],
}
SEEDS = [11, 12]
MAX_TOKENS = 400


def load(*parts):
    with open(os.path.join(DATA, *parts)) as f:
        return json.load(f)


@unittest.skipUnless(MODEL_DIR, "structured outputs are enforced by the engine backend only")
class Structured(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server().__enter__()
        cls.client = cls.server.client()
        cls.model = cls.server.model

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)

    def chat(self, **kw):
        kw.setdefault("messages", [{"role": "user", "content": "Answer."}])
        # Unset max_tokens: the rest of the context (the byte-level stand-in's prompts are long).
        kw.setdefault("temperature", 1.0)
        # Non-thinking: these tests check the grammar from the first token, whatever the server's default
        # (test_thinking_then_constraint covers thinking mode).
        kw["extra_body"] = {"chat_template_kwargs": {"thinking": False}, **kw.get("extra_body", {})}
        return self.client.chat.completions.create(model=self.model, **kw)

    def post(self, path, body):
        body = dict(body, model=self.model)
        return requests.post(self.server.url(path), json=body, timeout=60)

    def assert_all_stopped(self, finishes, what):
        stopped = sum(f in ("stop", "tool_calls") for f in finishes)
        print(f"\n{what}: {stopped}/{len(finishes)} finished before max_tokens", flush=True)
        # The budget rule closes every output in time (docs/structured-outputs.md, "Budget").
        self.assertEqual(stopped, len(finishes), f"{what}: finishes {finishes}")

    def test_json_schema(self):
        finishes = []
        for name in SCHEMAS:
            schema = load("schemas", name + ".json")
            for seed in SEEDS:
                with self.subTest(schema=name, seed=seed):
                    r = self.chat(seed=seed, response_format={
                        "type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}})
                    c = r.choices[0]
                    finishes.append(c.finish_reason)
                    if c.finish_reason == "stop":
                        jsonschema.validate(json.loads(c.message.content), schema)
        self.assert_all_stopped(finishes, "json_schema")

    def test_json_object(self):
        stopped = 0
        for seed in SEEDS + [13, 14]:
            r = self.chat(seed=seed, response_format={"type": "json_object"})
            if r.choices[0].finish_reason == "stop":
                stopped += 1
                self.assertIsInstance(json.loads(r.choices[0].message.content), dict)
        self.assertGreater(stopped, 0, "no json_object output finished before max_tokens")

    def test_guided_json_on_completions(self):
        schema = load("schemas", "044_geo_point.json")
        finishes = []
        for body in ({"guided_json": schema}, {"structured_outputs": {"json": json.dumps(schema)}}):
            for seed in SEEDS:
                r = self.post("/v1/completions", dict(body, prompt="x", max_tokens=MAX_TOKENS, seed=seed))
                self.assertEqual(r.status_code, 200, r.text)
                c = r.json()["choices"][0]
                finishes.append(c["finish_reason"])
                if c["finish_reason"] == "stop":
                    jsonschema.validate(json.loads(c["text"]), schema)
        self.assert_all_stopped(finishes, "guided_json")

    def test_regex(self):
        with open(os.path.join(DATA, "regex.txt")) as f:
            patterns = [p for p in f.read().splitlines() if p and not p.startswith("#")][:6]
        finishes = []
        for pattern in patterns:
            for seed in SEEDS:
                with self.subTest(pattern=pattern, seed=seed):
                    r = self.chat(seed=seed, extra_body={"guided_regex": pattern}, max_tokens=120)
                    c = r.choices[0]
                    finishes.append(c.finish_reason)
                    if c.finish_reason == "stop":
                        self.assertTrue(re.fullmatch(pattern, c.message.content), c.message.content)
                    r = self.post("/v1/completions", {"prompt": "x", "structured_outputs": {"regex": pattern},
                                                      "max_tokens": 120, "seed": seed})
                    c = r.json()["choices"][0]
                    finishes.append(c["finish_reason"])
                    if c["finish_reason"] == "stop":
                        self.assertTrue(re.fullmatch(pattern, c["text"]), c["text"])
        self.assert_all_stopped(finishes, "regex")

    def test_grammar(self):
        with open(os.path.join(DATA, "gbnf", "yes_no_answer.gbnf")) as f:
            grammar = "".join(line for line in f if not line.startswith("#"))
        for seed in SEEDS:
            r = self.chat(seed=seed, extra_body={"guided_grammar": grammar}, max_tokens=120)
            self.assertEqual(r.choices[0].finish_reason, "stop")
            self.assertTrue(re.fullmatch(r"Answer: (yes|no)\nReason: [A-Za-z ,]{1,40}", r.choices[0].message.content))

    def test_choice(self):
        choices = ["yes", "no", 'say "maybe"', "日本語", "a\\b"]
        for seed in SEEDS + [13, 14]:
            r = self.chat(seed=seed, extra_body={"guided_choice": choices}, max_tokens=30)
            self.assertEqual(r.choices[0].finish_reason, "stop")
            self.assertIn(r.choices[0].message.content, choices)
            r = self.post("/v1/completions", {"prompt": "x", "structured_outputs": {"choice": choices},
                                              "max_tokens": 30, "seed": seed})
            self.assertIn(r.json()["choices"][0]["text"], choices)

    def test_streaming_and_n(self):
        choices = ["alpha", "beta", "gamma delta"]
        stream = self.chat(seed=5, n=3, stream=True, extra_body={"guided_choice": choices}, max_tokens=30)
        texts, finishes = ["", "", ""], [None, None, None]
        for chunk in stream:
            for c in chunk.choices:
                texts[c.index] += c.delta.content or ""
                finishes[c.index] = c.finish_reason or finishes[c.index]
        self.assertEqual(finishes, ["stop"] * 3)
        for t in texts:
            self.assertIn(t, choices)

    def test_forced_tool_calls(self):
        finishes = []
        for name, tools in TOOLSETS.items():
            params = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
            last = tools[-1]["function"]["name"]
            for seed, choice, parallel in [(SEEDS[0], "required", False),
                                           (SEEDS[1], {"type": "function", "function": {"name": last}}, True)]:
                with self.subTest(toolset=name, seed=seed):
                    r = self.chat(seed=seed, tools=tools, tool_choice=choice, parallel_tool_calls=parallel)
                    c = r.choices[0]
                    finishes.append(c.finish_reason)
                    if c.finish_reason != "tool_calls":
                        continue
                    calls = c.message.tool_calls
                    self.assertTrue(calls)
                    if not parallel:
                        self.assertEqual(len(calls), 1)
                    for call in calls:
                        self.assertIn(call.function.name, params)
                        if isinstance(choice, dict):
                            self.assertEqual(call.function.name, last)
                        jsonschema.validate(json.loads(call.function.arguments), params[call.function.name])
        self.assert_all_stopped(finishes, "tool calls")

    def test_thinking_then_constraint(self):
        """In thinking mode the model thinks freely; the schema applies from the token after </think>. The random
        model never closes its thinking by itself, so the cap (half of max_tokens) closes it: the reasoning is
        at most that long and the answer still follows the schema."""
        schema = load("schemas", "044_geo_point.json")
        finishes = []
        for seed in SEEDS + [13]:
            r = self.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Where?"}], "seed": seed, "max_tokens": 600,
                "temperature": 1.0, "chat_template_kwargs": {"thinking": True},
                "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}})
            self.assertEqual(r.status_code, 200, r.text)
            body = r.json()
            c = body["choices"][0]
            finishes.append(c["finish_reason"])
            self.assertTrue(c["message"].get("reasoning_content"), "no reasoning in thinking mode")
            reasoning = body["usage"].get("completion_tokens_details", {}).get("reasoning_tokens")
            if reasoning is not None:
                self.assertLessEqual(reasoning, 300)
            if c["finish_reason"] == "stop":
                jsonschema.validate(json.loads(c["message"]["content"]), schema)
        self.assert_all_stopped(finishes, "thinking + json_schema")
        # A tool call forced after thinking.
        tools = TOOLSETS["weather"]
        r = self.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Weather?"}], "seed": 3, "max_tokens": 600, "tools": tools,
            "tool_choice": "required", "chat_template_kwargs": {"thinking": True}})
        c = r.json()["choices"][0]
        self.assertTrue(c["message"].get("reasoning_content"))
        if c["finish_reason"] == "tool_calls":
            for call in c["message"]["tool_calls"]:
                jsonschema.validate(json.loads(call["function"]["arguments"]), tools[0]["function"]["parameters"])

    def test_small_max_tokens_still_closes(self):
        """The budget rule: with max_tokens a little above the schema's shortest output (17 bytes for
        044_geo_point, 118 for 017_flight_booking), the random model, which writes endless strings when left
        alone, still finishes every output with finish "stop" and a valid document; in thinking mode too (the
        thinking closed early enough for the answer to fit). Some outputs run into the budget."""
        cases = [("044_geo_point", 24, False), ("044_geo_point", 40, True), ("017_flight_booking", 160, False)]
        for name, max_tokens, thinking in cases:
            schema = load("schemas", name + ".json")
            used = []
            for seed in SEEDS + [13, 14]:
                with self.subTest(schema=name, max_tokens=max_tokens, thinking=thinking, seed=seed):
                    r = self.post("/v1/chat/completions", {
                        "messages": [{"role": "user", "content": "Answer."}], "seed": seed,
                        "max_tokens": max_tokens, "temperature": 1.0,
                        "chat_template_kwargs": {"thinking": thinking},
                        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}}})
                    self.assertEqual(r.status_code, 200, r.text)
                    body = r.json()
                    c = body["choices"][0]
                    self.assertEqual(c["finish_reason"], "stop", c["message"])
                    jsonschema.validate(json.loads(c["message"]["content"]), schema)
                    used.append(body["usage"]["completion_tokens"])
                    self.assertLessEqual(used[-1], max_tokens)
            self.assertGreaterEqual(max(used), max_tokens - 4, f"{name}: no output ran into its budget ({used})")

    def test_auto_tool_calls_are_validated(self):
        """tool_choice auto: a call to an undeclared tool, or whose arguments break the schema, comes back as
        content text, not as a call; valid calls are kept (renumbered), also when streamed."""
        tools = TOOLSETS["weather"]

        def invoke(name, params):
            body = "".join(f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                           f'{v if isinstance(v, str) else json.dumps(v)}</｜DSML｜parameter>\n'
                           for k, v in params.items())
            return f'<｜DSML｜invoke name="{name}">\n{body}</｜DSML｜invoke>\n'

        def block(*invokes):
            return "\n\n<｜DSML｜tool_calls>\n" + "".join(invokes) + "</｜DSML｜tool_calls>"

        good = invoke("get_weather", {"city": "Paris", "days": 3})
        cases = [
            ("valid", block(good), ["get_weather"]),
            ("undeclared", block(invoke("launch_rocket", {"city": "Paris"})), []),
            ("bad type", block(invoke("get_weather", {"city": "Paris", "days": "three"})), []),
            ("out of range", block(invoke("get_weather", {"city": "Paris", "days": 70})), []),
            ("missing required", block(invoke("get_weather", {"days": 2})), []),
            ("extra property", block(invoke("get_weather", {"city": "Rome", "wind": True})), []),
            ("mixed", block(invoke("nope", {}), good), ["get_weather"]),
        ]
        for what, text, names in cases:
            with self.subTest(case=what):
                body = {"messages": [{"role": "user", "content": "Weather?"}], "tools": tools, "tool_choice": "auto",
                        "chat_template_kwargs": {"thinking": False}, "deepinfer_test": {"forced_output": "Sure." + text}}
                r = self.post("/v1/chat/completions", body)
                self.assertEqual(r.status_code, 200, r.text)
                c = r.json()["choices"][0]
                calls = c["message"].get("tool_calls") or []
                self.assertEqual([x["function"]["name"] for x in calls], names)
                self.assertEqual(c["finish_reason"], "tool_calls" if names else "stop")
                for x in calls:
                    self.assertEqual(json.loads(x["function"]["arguments"]), {"city": "Paris", "days": 3})
                content = c["message"].get("content") or ""
                self.assertTrue(content.startswith("Sure."), content)
                if len(names) < text.count("invoke name="):
                    self.assertIn("DSML", content, "the rejected call's text is kept")
                else:
                    self.assertNotIn("DSML", content)
                # Streamed: the same calls, indices from 0.
                s = requests.post(self.server.url("/v1/chat/completions"), stream=True, timeout=60,
                                  json=dict(body, model=self.model, stream=True))
                frags = []
                for line in s.iter_lines():
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        for ch in json.loads(line[6:]).get("choices", []):
                            frags += ch.get("delta", {}).get("tool_calls") or []
                self.assertEqual([f["function"]["name"] for f in frags if f.get("function", {}).get("name")], names)
                self.assertTrue(all(f["index"] == 0 for f in frags))
        # tool_choice required / named is enforced by the grammar; the check is for auto only.

    def test_preempted_constrained_requests_still_validate(self):
        """A KV pool too small for the batch: the engine preempts sequences and recomputes them from prompt +
        generated tokens, while each keeps its grammar state; every output still follows its constraint."""
        schema = load("schemas", "044_geo_point.json")
        pattern = "[a-z ]{400,500}"
        max_tokens = 300
        fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}
        r = self.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Go."}], "max_tokens": 1,
                                               "chat_template_kwargs": {"thinking": False}, "response_format": fmt})
        prompt = r.json()["usage"]["prompt_tokens"]  # the longer prompt of the two kinds (format instructions)
        blocks = (prompt + max_tokens + 15) // 16 + 1  # one whole request fits; eight at once do not
        with Server("--num-kv-blocks", str(blocks), "--block-size", "16") as s:
            def one(i):
                body = {"model": s.model, "messages": [{"role": "user", "content": "Go."}], "seed": 40 + i,
                        "temperature": 1.0, "max_tokens": max_tokens, "chat_template_kwargs": {"thinking": False}}
                if i % 2:
                    body["guided_regex"] = pattern
                else:
                    body["response_format"] = fmt
                r = requests.post(s.url("/v1/chat/completions"), json=body, timeout=300)
                self.assertEqual(r.status_code, 200, r.text)
                return i, r.json()["choices"][0]

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                results = list(pool.map(one, range(8)))
            preemptions = s.metrics().get("deepinfer_num_preemptions_total", 0)
        self.assertGreater(preemptions, 0, "the pool was meant to be too small")
        for i, c in results:
            if c["finish_reason"] != "stop":
                continue
            if i % 2:
                self.assertTrue(re.fullmatch(pattern, c["message"]["content"]), c["message"]["content"])
            else:
                jsonschema.validate(json.loads(c["message"]["content"]), schema)
        self.assertGreaterEqual(sum(c["finish_reason"] == "stop" for _, c in results), 4)

    def test_bad_constraints_are_400(self):
        bad = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": bad}})
        self.assertEqual(e.exception.body.get("param"), "response_format")
        self.assertIn("missing", e.exception.body.get("message"))
        for body, param in [({"guided_regex": "(a"}, "guided_regex"),
                            ({"guided_grammar": "root ::= undefined_rule"}, "guided_grammar"),
                            ({"guided_regex": "a", "guided_choice": ["b"]}, "guided_choice"),
                            ({"guided_choice": []}, "guided_choice"),
                            ({"structured_outputs": {"json": "{not json"}}, "structured_outputs.json")]:
            with self.subTest(body=body):
                r = self.post("/v1/completions", dict(body, prompt="x", max_tokens=5))
                self.assertEqual(r.status_code, 400, r.text)
                self.assertEqual(r.json()["error"]["param"], param)
        r = self.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                               "response_format": {"type": "json_object"},
                                               "guided_regex": "a"})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("guided_regex", r.json()["error"]["message"])


if __name__ == "__main__":
    unittest.main()
