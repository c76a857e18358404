"""The Anthropic Messages API (POST /v1/messages) through the official `anthropic` client: text, thinking
blocks, tool use (forced, named, a tool-result round trip), stop sequences, streaming events, errors and
x-api-key auth. Runs on DEEPINFER_TEST_MODEL (the real engine) or the fake backend."""

import json
import unittest

import anthropic
import requests

from common import Server, sse_events

TOOLS = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                           "required": ["city"]}}]
DSML_CALL = ("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
             "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
             "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
             "</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
HI = [{"role": "user", "content": "Hi"}]


def forced(text):
    return {"deepinfer_test": {"forced_output": text}}


class Messages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(api_key="sk-test").__enter__()
        cls.client = anthropic.Anthropic(base_url=cls.server.url(""), api_key="sk-test", max_retries=0, timeout=120)
        cls.model = cls.server.model

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)

    def create(self, **kw):
        kw.setdefault("messages", HI)
        kw.setdefault("max_tokens", 400)  # forced outputs cost a token per byte on the tiny models
        return self.client.messages.create(model=self.model, **kw)

    def test_generated_text_and_usage(self):
        # (this SDK version has no temperature / top_k arguments: sent as extra fields)
        m = self.create(max_tokens=6, thinking={"type": "disabled"}, extra_body={"temperature": 0, "top_k": 1})
        self.assertEqual((m.type, m.role, m.model), ("message", "assistant", self.model))
        self.assertTrue(m.id.startswith("msg_"))
        self.assertIn(m.stop_reason, ("end_turn", "max_tokens"))
        self.assertLessEqual(m.usage.output_tokens, 6)
        self.assertGreater(m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0), 0)
        self.assertTrue(all(b.type == "text" for b in m.content))

    def test_thinking_text_and_tool_use_blocks(self):
        m = self.create(tools=TOOLS, extra_body=forced("Need weather.</think>Checking." + DSML_CALL))
        self.assertEqual([b.type for b in m.content], ["thinking", "text", "tool_use"])
        self.assertEqual(m.content[0].thinking, "Need weather.")
        self.assertEqual(m.content[1].text, "Checking.")
        call = m.content[2]
        self.assertEqual(call.name, "get_weather")
        self.assertEqual(call.input, {"city": "Paris", "days": 3})
        self.assertTrue(call.id)
        self.assertEqual(m.stop_reason, "tool_use")

    def test_thinking_disabled_gives_no_thinking_block(self):
        m = self.create(thinking={"type": "disabled"}, extra_body=forced("Plain answer."))
        self.assertEqual([(b.type, b.text) for b in m.content], [("text", "Plain answer.")])
        self.assertEqual(m.stop_reason, "end_turn")

    def test_stop_sequence(self):
        m = self.create(thinking={"type": "disabled"}, stop_sequences=["STOP"], extra_body=forced("abcSTOPdef"))
        self.assertEqual(m.content[0].text, "abc")
        self.assertEqual((m.stop_reason, m.stop_sequence), ("stop_sequence", "STOP"))

    def test_tool_result_round_trip_and_forced_tool_choice(self):
        messages = [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Use the tool.", "signature": ""},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21 C"}]}]
        m = self.create(messages=messages, tools=TOOLS, thinking={"type": "disabled"},
                        extra_body=forced("It is sunny."))
        self.assertEqual(m.content[-1].text, "It is sunny.")
        # tool_choice any / tool: a call is forced and its input follows the schema (the engine backend
        # enforces it; the fake backend replays the forced output).
        for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
            m = self.create(tools=TOOLS, tool_choice=choice, extra_body=forced(DSML_CALL))
            calls = [b for b in m.content if b.type == "tool_use"]
            self.assertGreaterEqual(len(calls), 1, m)
            self.assertEqual(calls[0].name, "get_weather")
            self.assertIn("city", calls[0].input)
            self.assertEqual(m.stop_reason, "tool_use")

    def test_streaming_events(self):
        with self.client.messages.stream(model=self.model, max_tokens=400, messages=HI, tools=TOOLS,
                                         extra_body=forced("Hmm.</think>Sure." + DSML_CALL)) as stream:
            events = [e.type for e in stream]
            final = stream.get_final_message()
        self.assertEqual(events[0], "message_start")
        self.assertIn("content_block_start", events)
        self.assertIn("content_block_stop", events)
        self.assertEqual(events[-1], "message_stop")
        self.assertEqual([b.type for b in final.content], ["thinking", "text", "tool_use"])
        self.assertEqual(final.content[0].thinking, "Hmm.")
        self.assertEqual(final.content[1].text, "Sure.")
        self.assertEqual(final.content[2].input, {"city": "Paris", "days": 3})
        self.assertEqual(final.stop_reason, "tool_use")
        n = self.client.messages.count_tokens(model=self.model, messages=HI, tools=TOOLS).input_tokens
        self.assertEqual(final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0), n)
        self.assertGreater(final.usage.output_tokens, 0)

    def test_streaming_raw_event_order(self):
        r = requests.post(self.server.url("/v1/messages"), timeout=60, stream=True, headers={"x-api-key": "sk-test"},
                          json={"model": self.model, "max_tokens": 16, "stream": True, "messages": HI,
                                **forced("Why.</think>Because.")})
        self.assertEqual(r.status_code, 200)
        data = [json.loads(d) for d in sse_events(r.iter_lines())]
        types = [d["type"] for d in data]
        self.assertEqual(types[0], "message_start")
        self.assertEqual(types[-2:], ["message_delta", "message_stop"])
        deltas = [d["delta"]["type"] for d in data if d["type"] == "content_block_delta"]
        self.assertEqual(deltas[0], "thinking_delta")  # no thinking field: the server default, thinking
        self.assertIn("text_delta", deltas)
        self.assertEqual(data[-2]["delta"]["stop_reason"], "end_turn")
        self.assertGreater(data[-2]["usage"]["output_tokens"], 0)
        starts = [d["index"] for d in data if d["type"] == "content_block_start"]
        self.assertEqual(starts, list(range(len(starts))))

    def test_count_tokens_matches_the_messages_usage(self):
        kw = dict(messages=HI, thinking={"type": "disabled"})
        n = self.client.messages.count_tokens(model=self.model, **kw).input_tokens
        m = self.create(max_tokens=1, **kw)
        self.assertEqual(n, m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0))
        with_tools = self.client.messages.count_tokens(model=self.model, tools=TOOLS, **kw).input_tokens
        self.assertGreater(with_tools, n)

    def test_output_config_effort_sets_reasoning_effort(self):
        # The rendered prompt differs between effort max and the default (high) only where the effort table
        # renders them differently; what must hold is that both are accepted and thinking is on.
        for effort in ("high", "max"):
            m = self.create(output_config={"effort": effort}, extra_body=forced("Deep.</think>Done."))
            self.assertEqual([b.type for b in m.content], ["thinking", "text"])

    def test_errors_have_the_anthropic_shape(self):
        with self.assertRaises(anthropic.NotFoundError):
            self.client.messages.create(model="claude-nope", max_tokens=5, messages=HI)
        bad = anthropic.Anthropic(base_url=self.server.url(""), api_key="wrong", max_retries=0)
        with self.assertRaises(anthropic.AuthenticationError):
            bad.messages.create(model=self.model, max_tokens=5, messages=HI)
        r = requests.post(self.server.url("/v1/messages"), headers={"x-api-key": "sk-test"}, timeout=30,
                          json={"model": self.model, "messages": HI})
        self.assertEqual(r.status_code, 400)
        body = r.json()
        self.assertEqual(body["type"], "error")
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        self.assertIn("max_tokens", body["error"]["message"])
        with self.assertRaises(anthropic.BadRequestError) as ctx:
            self.create(messages=[{"role": "user", "content": [{"type": "tool_result"}]}])
        self.assertIn("messages[0].content[0].tool_use_id", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
