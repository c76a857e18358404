"""The OpenAI API through the official `openai` client and raw HTTP: chat and completions, streaming or
not, n > 1, logprobs, stop strings, seeds, tool calls, reasoning, and every class of bad input."""

import json
import socket
import threading
import time
import unittest

import openai
import requests

from common import MODEL_DIR, Server, sse_events

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
DSML_CALL = ("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
             "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
             "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
             "</｜DSML｜invoke>\n</｜DSML｜tool_calls>")


def real_tokenizer(model_dir):
    """True when the served model is large enough for the real DeepSeek V4 tokenizer (not the stand-in)."""
    if not model_dir:
        return False
    with open(f"{model_dir}/config.json") as f:
        return json.load(f).get("vocab_size", 0) >= 129280


def events(response):
    """The JSON events of an SSE response, [DONE] left out."""
    return [json.loads(d) for d in sse_events(response.iter_lines()) if d != "[DONE]"]


def eos_id():
    """The served model's EOS id (the fake backend's is 257)."""
    if not MODEL_DIR:
        return 257
    with open(f"{MODEL_DIR}/config.json") as f:
        return json.load(f)["eos_token_id"]


def forced(text):
    return {"deepinfer_test": {"forced_output": text}}


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server().__enter__()
        cls.client = cls.server.client()
        cls.model = cls.server.model

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)

    def chat(self, **kw):
        kw.setdefault("messages", [{"role": "user", "content": "Say something."}])
        return self.client.chat.completions.create(model=self.model, **kw)

    def post(self, path, body, **kw):
        return requests.post(self.server.url(path), json=body, timeout=60, **kw)

    # ---- happy paths ----

    def test_models(self):
        ids = [m.id for m in self.client.models.list().data]
        self.assertEqual(ids, [self.model])

    def test_chat_non_streaming(self):
        r = self.chat(max_tokens=8, temperature=0)
        c = r.choices[0]
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(c.message.role, "assistant")
        self.assertIsInstance(c.message.content, str)
        self.assertIn(c.finish_reason, ("stop", "length"))
        self.assertLessEqual(r.usage.completion_tokens, 8)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        self.assertIsNotNone(r.usage.prompt_tokens_details)
        self.assertGreaterEqual(r.usage.prompt_tokens_details.cached_tokens, 0)

    def test_chat_streaming_with_usage(self):
        stream = self.chat(max_tokens=10, stream=True, stream_options={"include_usage": True}, temperature=0)
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        usage = chunks[-1]
        self.assertEqual(usage.choices, [])
        self.assertEqual(len({c.id for c in chunks}), 1)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(len(finishes), 1)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        full = self.chat(max_tokens=10, temperature=0).choices[0].message.content
        self.assertEqual(text, full)  # greedy: streaming and not agree
        self.assertEqual(usage.usage.completion_tokens, self.chat(max_tokens=10, temperature=0).usage.completion_tokens)

    def test_completions(self):
        r = self.client.completions.create(model=self.model, prompt="Once upon a time", max_tokens=6, temperature=0)
        self.assertEqual(r.object, "text_completion")
        self.assertLessEqual(r.usage.completion_tokens, 6)
        s = list(self.client.completions.create(model=self.model, prompt="Once upon a time", max_tokens=6,
                                                temperature=0, stream=True))
        self.assertEqual("".join(c.choices[0].text for c in s if c.choices), r.choices[0].text)

    def test_completions_prompt_shapes(self):
        ids = self.client.completions.create(model=self.model, prompt=[1, 2, 3], max_tokens=2)
        self.assertEqual(ids.usage.prompt_tokens, 3)
        many = self.client.completions.create(model=self.model, prompt=["a", "bb", "ccc"], max_tokens=2, n=2)
        self.assertEqual(sorted(c.index for c in many.choices), list(range(6)))
        lists = self.client.completions.create(model=self.model, prompt=[[5, 6], [7]], max_tokens=1)
        self.assertEqual(lists.usage.prompt_tokens, 3)

    def test_n_greater_than_one(self):
        r = self.chat(n=3, max_tokens=5)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2])
        chunks = list(self.chat(n=3, max_tokens=5, stream=True))
        finished = sorted(c.choices[0].index for c in chunks if c.choices and c.choices[0].finish_reason)
        self.assertEqual(finished, [0, 1, 2])

    def test_logprobs(self):
        r = self.chat(max_tokens=6, logprobs=True, top_logprobs=3)
        lp = r.choices[0].logprobs.content
        self.assertEqual(len(lp), r.usage.completion_tokens)
        for t in lp:
            self.assertLessEqual(t.logprob, 0.0)
            self.assertEqual(len(t.top_logprobs), 3)
            self.assertEqual(bytes(t.bytes).decode("utf-8", "replace"), t.token)
        c = self.client.completions.create(model=self.model, prompt="x", max_tokens=4, logprobs=2)
        self.assertEqual(len(c.choices[0].logprobs.tokens), c.usage.completion_tokens)
        self.assertEqual(len(c.choices[0].logprobs.top_logprobs[0]), 2)
        self.assertIsNone(self.chat(max_tokens=2).choices[0].logprobs)

    def test_seeded_requests_reproduce(self):
        a = self.chat(max_tokens=24, temperature=1.0, seed=1234).choices[0].message.content
        b = self.chat(max_tokens=24, temperature=1.0, seed=1234).choices[0].message.content
        self.assertEqual(a, b)
        s = "".join(c.choices[0].delta.content or "" for c in
                    self.chat(max_tokens=24, temperature=1.0, seed=1234, stream=True) if c.choices)
        self.assertEqual(a, s)

    def test_stop_strings(self):
        base = self.client.completions.create(model=self.model, prompt="stop test", max_tokens=40, seed=99,
                                              temperature=1.0)
        text = base.choices[0].text
        if len(text) < 12:
            self.skipTest("model produced too little text to pick a stop string from")
        stop = text[8:11]
        first = text.find(stop)
        r = self.client.completions.create(model=self.model, prompt="stop test", max_tokens=40, seed=99,
                                           temperature=1.0, stop=[stop, "\x00never"])
        self.assertEqual(r.choices[0].text, text[:first])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        streamed = "".join(c.choices[0].text for c in self.client.completions.create(
            model=self.model, prompt="stop test", max_tokens=40, seed=99, temperature=1.0, stop=stop,
            stream=True) if c.choices)
        self.assertEqual(streamed, text[:first])

    # ---- n > 1 and vLLM's sampling fields (issue 12) ----

    def test_n_forks_one_prompt_in_the_engine(self):
        prompt = "fork %d: one prefill for every choice" % time.time_ns()  # unique: no prefix-cache hits
        before = self.server.metrics()["deepinfer_prefill_tokens_total"]
        r = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=8, n=4, temperature=1.0,
                                           seed=7)
        prefilled = self.server.metrics()["deepinfer_prefill_tokens_total"] - before
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2, 3])
        self.assertEqual(prefilled, r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens)
        texts = [c.text for c in sorted(r.choices, key=lambda c: c.index)]
        self.assertGreater(len(set(texts)), 1, texts)  # each choice samples its own stream
        again = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=8, n=4,
                                               temperature=1.0, seed=7)
        self.assertEqual([c.text for c in sorted(again.choices, key=lambda c: c.index)], texts)

    def test_stop_token_ids_min_tokens_and_ignore_eos(self):
        tok = 70  # made certain by a +100 bias

        def run(bias, **extra):
            r = self.client.completions.create(model=self.model, prompt="x", max_tokens=8, logit_bias={str(bias): 100},
                                               extra_body=extra)
            return r.usage.completion_tokens, r.choices[0].finish_reason

        self.assertEqual(run(tok), (8, "length"))
        self.assertEqual(run(tok, stop_token_ids=[tok]), (1, "stop"))
        self.assertEqual(run(tok, stop_token_ids=[tok], min_tokens=3), (4, "stop"))
        n, finish = run(eos_id())
        self.assertEqual(finish, "stop")
        self.assertLessEqual(n, 1)
        self.assertEqual(run(eos_id(), ignore_eos=True), (8, "length"))
        self.assertEqual(run(eos_id(), min_tokens=5), (6, "stop"))
        for bad in ({"min_tokens": 20, "max_tokens": 4}, {"stop_token_ids": [-1]}, {"stop_token_ids": "7"},
                    {"ignore_eos": "yes"}):
            body = {"model": self.model, "prompt": "x", "max_tokens": 4, **bad}
            r = self.post("/v1/completions", body)
            self.assertEqual(r.status_code, 400, r.text)
            self.assertIn(next(k for k in bad if k != "max_tokens"), r.text)

    def test_include_stop_str_in_output(self):
        out = "alpha beta ##END## gamma"
        for stream in (False, True):
            for include in (False, True):
                body = {"model": self.model, "prompt": "x", "max_tokens": 64, "stream": stream, "stop": ["##END##"],
                        "include_stop_str_in_output": include, **forced(out)}
                r = self.post("/v1/completions", body, stream=stream)
                self.assertEqual(r.status_code, 200, r.text)
                if stream:
                    text = "".join(e["choices"][0]["text"] for e in events(r) if e.get("choices"))
                else:
                    text = r.json()["choices"][0]["text"]
                self.assertEqual(text, "alpha beta ##END##" if include else "alpha beta ")

    def test_echo_with_logprobs_scores_the_prompt(self):
        prompt = "Hello echo"
        r = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=3, echo=True, logprobs=1,
                                           temperature=0)
        c = r.choices[0]
        self.assertTrue(c.text.startswith(prompt), c.text)
        lp = c.logprobs
        self.assertEqual(len(lp.tokens), r.usage.prompt_tokens + r.usage.completion_tokens)
        self.assertEqual("".join(lp.tokens[:r.usage.prompt_tokens]), prompt)
        self.assertIsNone(lp.token_logprobs[0])  # nothing predicts the first prompt token
        self.assertIsNone(lp.top_logprobs[0])
        for v in lp.token_logprobs[1:]:
            self.assertLessEqual(v, 0.0)
        self.assertEqual(lp.text_offset, [len("".join(lp.tokens[:k])) for k in range(len(lp.tokens))])
        streamed = [e for e in self.client.completions.create(model=self.model, prompt=prompt, max_tokens=3,
                                                              echo=True, logprobs=1, temperature=0, stream=True)
                    if e.choices]
        self.assertEqual("".join(e.choices[0].text for e in streamed), c.text)
        self.assertEqual([t for e in streamed if e.choices[0].logprobs for t in e.choices[0].logprobs.tokens],
                         lp.tokens)
        plain = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=2, echo=True)
        self.assertTrue(plain.choices[0].text.startswith(prompt))
        self.assertIsNone(plain.choices[0].logprobs)

    def test_text_offset_counts_characters(self):
        prompt = "h\u00e9llo w\u00f6rld \u20ac"
        r = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=3, echo=True, logprobs=0)
        c = r.choices[0]
        offsets = c.logprobs.text_offset
        self.assertEqual(offsets[0], 0)
        self.assertEqual(offsets, sorted(offsets))
        # The first output token starts after the prompt's 13 characters (17 bytes).
        self.assertEqual(offsets[r.usage.prompt_tokens], len(prompt))
        out = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=4, logprobs=0)
        self.assertEqual(out.choices[0].logprobs.text_offset[0], 0)

    def test_prompt_logprobs_in_vllm_shape(self):
        ids = [5, 6, 7, 8]
        for stream in (False, True):
            r = self.post("/v1/completions", {"model": self.model, "prompt": ids, "max_tokens": 2, "n": 2,
                                              "prompt_logprobs": 2, "stream": stream}, stream=stream)
            self.assertEqual(r.status_code, 200, r.text)
            if stream:
                firsts = {}
                for e in events(r):
                    for ch in e.get("choices", []):
                        firsts.setdefault(ch["index"], ch)
                choices = [firsts[0], firsts[1]]
            else:
                choices = r.json()["choices"]
            for ch in choices:
                plp = ch["prompt_logprobs"]
                self.assertEqual(len(plp), len(ids))
                self.assertIsNone(plp[0])
                for k, entry in enumerate(plp[1:], 1):
                    self.assertIn(str(ids[k]), entry)
                    self.assertLessEqual(len(entry), 3)
                    for v in entry.values():
                        self.assertLessEqual(v["logprob"], 0.0)
                        self.assertGreaterEqual(v["rank"], 1)
                        self.assertIn("decoded_token", v)

    def test_forced_stop_string_is_never_emitted(self):
        out = "alpha beta ##END## gamma"
        for stream in (False, True):
            # Non-thinking, so the forced text is content (a silent request would render thinking).
            r = self.post("/v1/chat/completions", {"model": self.model, "stream": stream, "stop": "##END##",
                                                   "thinking": False,
                                                   "messages": [{"role": "user", "content": "x"}], **forced(out)},
                          stream=stream)
            self.assertEqual(r.status_code, 200)
            if stream:
                text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "")
                               for e in sse_events(r.iter_lines()) if e != "[DONE]" and json.loads(e)["choices"])
            else:
                text = r.json()["choices"][0]["message"]["content"]
            self.assertEqual(text, "alpha beta ")

    def test_reasoning_in_both_fields(self):
        out = "Let me think.</think>The answer is 4."
        r = self.chat(extra_body={"chat_template_kwargs": {"thinking": True}, **forced(out)})
        msg = r.choices[0].message.model_dump()
        self.assertEqual(msg["reasoning_content"], "Let me think.")
        self.assertEqual(msg["reasoning"], "Let me think.")
        self.assertEqual(msg["content"], "The answer is 4.")
        chunks = list(self.chat(stream=True, reasoning_effort="high", extra_body=forced(out)))
        deltas = [c.choices[0].delta.model_dump() for c in chunks if c.choices]
        self.assertEqual("".join(d.get("reasoning_content") or "" for d in deltas), "Let me think.")
        self.assertEqual("".join(d.get("reasoning") or "" for d in deltas), "Let me think.")
        self.assertEqual("".join(d.get("content") or "" for d in deltas), "The answer is 4.")

    def test_plain_content_keeps_role_markers_as_text(self):
        # deepinfer extension: "plain_content" encodes message text without matching special tokens. With
        # the real DeepSeek V4 tokenizer a typed role marker is then several text tokens instead of one
        # control token; the default stays the official behaviour (the marker becomes the control token).
        msgs = [{"role": "user", "content": "quote: <｜Assistant｜></think> ok"}]
        def prompt_tokens(**extra):
            r = self.post("/v1/chat/completions", dict(model=self.model, messages=msgs, max_tokens=1, **extra))
            self.assertEqual(r.status_code, 200, r.text)
            return r.json()["usage"]["prompt_tokens"]
        default, plain = prompt_tokens(), prompt_tokens(plain_content=True)
        self.assertEqual(prompt_tokens(plain_content=False), default)
        if real_tokenizer(self.server.model_dir):
            self.assertGreater(plain, default)
        else:
            self.assertEqual(plain, default)  # the byte-level stand-in has no special tokens inside text
        bad = self.post("/v1/chat/completions", dict(model=self.model, messages=msgs, plain_content="yes"))
        self.assertEqual(bad.status_code, 400)
        self.assertIn("plain_content", bad.text)
        if real_tokenizer(self.server.model_dir):
            with Server("--plain-content") as s:
                r = requests.post(s.url("/v1/chat/completions"), timeout=60,
                                  json=dict(model=s.model, messages=msgs, max_tokens=1))
                self.assertEqual(r.status_code, 200, r.text)
                self.assertEqual(r.json()["usage"]["prompt_tokens"], plain)

    def test_tool_calls(self):
        # Non-thinking: the forced text opens with content (test_reasoning_then_tool_call covers thinking).
        no_think = {"thinking": False}
        r = self.chat(tools=TOOLS, extra_body={**no_think, **forced("Checking." + DSML_CALL)})
        c = r.choices[0]
        self.assertEqual(c.finish_reason, "tool_calls")
        self.assertEqual(c.message.content, "Checking.")
        call = c.message.tool_calls[0]
        self.assertEqual(call.type, "function")
        self.assertEqual(call.function.name, "get_weather")
        self.assertEqual(json.loads(call.function.arguments), {"city": "Paris", "days": 3})
        self.assertTrue(call.id)
        # Streaming: argument fragments arrive in several chunks and assemble to the same JSON.
        chunks = [c for c in self.chat(tools=TOOLS, stream=True,
                                       extra_body={**no_think, **forced("Checking." + DSML_CALL)}) if c.choices]
        frags = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
        self.assertGreaterEqual(len(frags), 3)
        self.assertEqual(frags[0].function.name, "get_weather")
        self.assertTrue(frags[0].id)
        self.assertEqual(json.loads("".join(f.function.arguments or "" for f in frags)), {"city": "Paris", "days": 3})
        self.assertNotIn("DSML", "".join(c.choices[0].delta.content or "" for c in chunks))
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason], ["tool_calls"])

    def test_reasoning_then_tool_call_by_default(self):
        # A request without thinking fields renders thinking (DeepSeek's default): reasoning, then the call.
        r = self.chat(tools=TOOLS, extra_body=forced("Need the weather.</think>" + DSML_CALL))
        msg = r.choices[0].message
        self.assertEqual(msg.model_extra.get("reasoning_content"), "Need the weather.")
        self.assertEqual(json.loads(msg.tool_calls[0].function.arguments), {"city": "Paris", "days": 3})
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")

    def test_tool_choice_none_leaves_markup_unparsed_and_round_trip_accepted(self):
        r = self.chat(tools=TOOLS, tool_choice="none", extra_body=forced("plain"))
        self.assertIsNone(r.choices[0].message.tool_calls)
        for choice in ("auto", "required", {"type": "function", "function": {"name": "get_weather"}}):
            self.assertEqual(self.chat(tools=TOOLS, tool_choice=choice, max_tokens=2).object, "chat.completion")
        history = [
            {"role": "system", "content": "You are terse."},
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "reasoning_content": "Need the tool.",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]
        r = self.chat(messages=history, tools=TOOLS, max_tokens=4)
        self.assertEqual(r.object, "chat.completion")

    def test_response_format_and_user(self):
        r = self.chat(response_format={"type": "json_object"}, user="u-1", max_tokens=3)
        self.assertEqual(r.object, "chat.completion")
        r = self.chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object"}}}, max_tokens=3)
        self.assertEqual(r.object, "chat.completion")

    def test_max_completion_tokens_and_sampling_fields(self):
        r = self.chat(max_completion_tokens=3, top_p=0.9, presence_penalty=0.5, frequency_penalty=0.5,
                      extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1})
        self.assertLessEqual(r.usage.completion_tokens, 3)

    # ---- bad input ----

    def expect_error(self, status, param, body=None, raw=None, path="/v1/chat/completions", headers=None):
        if raw is not None:
            r = requests.post(self.server.url(path), data=raw, timeout=30,
                              headers=headers or {"Content-Type": "application/json"})
        else:
            r = requests.post(self.server.url(path), json=body, timeout=30, headers=headers)
        self.assertEqual(r.status_code, status, r.text)
        err = r.json()["error"]
        self.assertIsInstance(err["message"], str)
        self.assertIn("type", err)
        if param is not None:
            self.assertEqual(err["param"], param)
        return err

    def test_malformed_json(self):
        for raw in (b"{", b"not json", b"[1,2]", b"", b"\xff\xfe", b'{"model": "x",}'):
            self.expect_error(400, None, raw=raw)
            self.expect_error(400, None, raw=raw, path="/v1/completions")

    def test_wrong_types_and_invalid_sampling_values(self):
        msgs = [{"role": "user", "content": "hi"}]
        cases = [("temperature", "hot"), ("temperature", -1), ("temperature", 5), ("top_p", 0), ("top_p", 2),
                 ("top_k", -5), ("min_p", 1.5), ("presence_penalty", 3), ("frequency_penalty", -3),
                 ("repetition_penalty", 0), ("max_tokens", 0), ("max_tokens", "ten"), ("n", 0), ("n", 10000),
                 ("seed", "abc"), ("stop", 3), ("logit_bias", {"x": 1}), ("logit_bias", {"1": 500}),
                 ("stream", "yes"), ("logprobs", "yes"), ("tools", "x"), ("tool_choice", "always"),
                 ("messages", "hi"), ("messages", []), ("response_format", {"type": "yaml"}),
                 ("reasoning_effort", "ultra")]
        for field, value in cases:
            body = {"model": self.model, "messages": msgs, field: value}
            err = self.expect_error(400, None, body)
            self.assertTrue(err["param"].startswith(field), (field, value, err))
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.chat(temperature=9)
        self.assertEqual(ctx.exception.body["param"], "temperature")

    def test_unknown_model(self):
        with self.assertRaises(openai.NotFoundError):
            self.client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
        self.expect_error(404, "model", {"model": "nope", "prompt": "x"}, path="/v1/completions")

    def test_prompt_over_context_limit(self):
        long = "word " * (self.server.context + 10)
        # 400 (not 413), naming the field and giving the numbers, as OpenAI and vLLM answer.
        err = self.expect_error(400, "messages", {"model": self.model, "messages": [{"role": "user", "content": long}]})
        self.assertEqual(err["code"], "context_length_exceeded")
        self.assertIn(str(self.server.context), err["message"])
        self.assertIn("'messages'", err["message"])
        err = self.expect_error(400, "prompt", {"model": self.model, "prompt": long}, path="/v1/completions")
        self.assertIn("'prompt'", err["message"])
        self.expect_error(400, "max_tokens", {"model": self.model, "prompt": "x", "max_tokens": self.server.context},
                          path="/v1/completions")

    def test_body_too_large_and_unknown_route(self):
        r = requests.post(self.server.url("/v1/chat/completions"), data=b"x" * (33 << 20), timeout=60)
        self.assertEqual(r.status_code, 413)
        r = requests.get(self.server.url("/v1/nothing"), timeout=10)
        self.assertEqual(r.status_code, 404)
        self.assertIn("error", r.json())


class Disconnect(unittest.TestCase):
    def test_client_disconnect_aborts_and_frees_kv(self):
        with Server(fake_step_us=20000) as s:
            body = {"model": s.model, "prompt": "x", "max_tokens": min(900, s.context - 16), "stream": True,
                    "logit_bias": {"1": -100}}
            before = s.metrics().get('deepinfer_requests_total{endpoint="/v1/completions",status="499"}', 0)
            data = json.dumps(body).encode()
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
            received = b""
            while received.count(b"data: {") < 3:  # a few chunks: it is generating
                data = sock.recv(4096)
                self.assertTrue(data, received)
                received += data
            self.assertEqual(s.metrics()["deepinfer_num_requests_running"], 1)
            sock.close()  # the client goes away mid-stream
            deadline = time.time() + 30
            while time.time() < deadline:
                m = s.metrics()
                if m["deepinfer_http_requests_in_flight"] == 0 and m["deepinfer_num_requests_running"] == 0:
                    break
                time.sleep(0.05)
            self.assertEqual(m["deepinfer_http_requests_in_flight"], 0)
            self.assertEqual(m["deepinfer_num_requests_running"], 0)
            self.assertEqual(m["deepinfer_kv_cache_usage_ratio"], 0)
            self.assertEqual(m['deepinfer_requests_total{endpoint="/v1/completions",status="499"}'], before + 1)
            self.assertLess(m["deepinfer_generation_tokens_total"], body["max_tokens"])  # stopped early


class Auth(unittest.TestCase):
    def test_api_key(self):
        with Server(api_key="sekrit") as s:
            with self.assertRaises(openai.AuthenticationError):
                s.client(api_key="wrong").models.list()
            self.assertEqual(requests.get(s.url("/v1/models"), timeout=10).status_code, 401)
            self.assertEqual(s.client().models.list().data[0].id, s.model)
            self.assertEqual(requests.get(s.url("/health"), timeout=10).status_code, 200)


class Busy(unittest.TestCase):
    def test_full_server_answers_429(self):
        with Server("--max-inflight", "2", fake_step_us=20000) as s:
            # Long enough to still run when the third request comes (EOS, id 1 in the tiny model, banned).
            body = {"model": s.model, "prompt": "x", "max_tokens": min(900, s.context - 16), "stream": True,
                    "logit_bias": {"1": -100}}
            holders = [threading.Thread(target=lambda: requests.post(s.url("/v1/completions"), json=body,
                                                                     timeout=120).content) for _ in range(2)]
            for t in holders:
                t.start()
            deadline = time.time() + 30
            while s.metrics().get("deepinfer_http_requests_in_flight", 0) < 2 and time.time() < deadline:
                time.sleep(0.05)
            with self.assertRaises(openai.RateLimitError):
                s.client().completions.create(model=s.model, prompt="y", max_tokens=1)
            for t in holders:
                t.join()
            self.assertEqual(s.client().completions.create(model=s.model, prompt="y", max_tokens=1).object,
                             "text_completion")


if __name__ == "__main__":
    unittest.main()
