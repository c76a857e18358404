"""DeepSeek's thinking defaults, the server flags that change them, render-chat agreeing with the server,
vLLM launch-flag compatibility, and the utility endpoints (/tokenize, /detokenize, /version,
/v1/models/{id}, 405). The rendering checks need the real DeepSeek V4 encoder (DEEPINFER_TEST_MODEL: the
tiny model, whose byte-level stand-in codec spells the effort prompts as single ids, which /detokenize turns
back into the text); the rest also runs on the fake backend."""

import json
import os
import subprocess
import unittest

import openai
import requests

from common import BIN, MODEL_DIR, Server, binary_for

BOS = "<｜begin▁of▁sentence｜>"
HIGH = "Reasoning Effort: Absolute maximum"  # the 0731 table's high prompt
MAX = "Reasoning Effort: Beyond maximum"     # the 0731 table's max prompt
MESSAGES = [{"role": "user", "content": "Hi there"}]


def render_chat(request, *flags):
    """`deepinfer render-chat` on the request with the 0731 effort table; the prompt without BOS."""
    out = subprocess.run([BIN, "render-chat", "--effort-table", "0731", *flags, json.dumps(request)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout
    return text[len(BOS):] if text.startswith(BOS) else text


def serve_fails(*args):
    """Runs `deepinfer serve ARGS` expecting a startup refusal; returns its stderr."""
    p = subprocess.run([binary_for(args), "serve", "--port", "0", *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0, "serve %s started" % (args,)
    return p.stderr


@unittest.skipUnless(MODEL_DIR, "needs DEEPINFER_TEST_MODEL (the real DeepSeek V4 encoder)")
class ThinkingDefaults(unittest.TestCase):
    def rendered(self, server, request):
        """The prompt the server renders for a chat request, as text (via /tokenize and /detokenize)."""
        body = dict(request, messages=request.get("messages", MESSAGES))
        ids = requests.post(server.url("/tokenize"), json=body, timeout=30)
        self.assertEqual(ids.status_code, 200, ids.text)
        text = requests.post(server.url("/detokenize"), json={"tokens": ids.json()["tokens"]}, timeout=30)
        self.assertEqual(text.status_code, 200, text.text)
        return text.json()["prompt"]

    def check(self, server, request, thinking, effort, *render_flags):
        """The server renders `request` in this mode, and render-chat (same flags) renders the same."""
        got = self.rendered(server, request)
        self.assertTrue(got.endswith("<｜Assistant｜><think>" if thinking else "<｜Assistant｜></think>"), got)
        self.assertEqual(HIGH in got, effort == "high", got)
        self.assertEqual(MAX in got, effort == "max", got)
        self.assertEqual(render_chat(dict(request, messages=request.get("messages", MESSAGES)), *render_flags), got)

    def test_request_without_thinking_fields_is_thinking_high(self):
        with Server("--effort-table", "0731") as s:
            self.check(s, {}, True, "high")
            self.check(s, {"reasoning_effort": "xhigh"}, True, "max")
            self.check(s, {"reasoning_effort": "max"}, True, "max")
            self.check(s, {"reasoning_effort": "low"}, True, "high")
            self.check(s, {"thinking": False}, False, None)
            self.check(s, {"chat_template_kwargs": {"thinking": False}}, False, None)
            self.check(s, {"thinking": {"type": "disabled"}}, False, None)
            self.check(s, {"reasoning_effort": "none"}, False, None)

    def test_default_chat_template_kwargs_flag(self):
        flags = ("--default-chat-template-kwargs", '{"thinking": false}')
        with Server("--effort-table", "0731", *flags) as s:
            self.check(s, {}, False, None, *flags)
            self.check(s, {"thinking": True}, True, "high", *flags)
            self.check(s, {"reasoning_effort": "max"}, True, "max", *flags)

    def test_reasoning_effort_flag(self):
        flags = ("--reasoning-effort", "max")
        with Server("--effort-table", "0731", *flags) as s:
            self.check(s, {}, True, "max", *flags)
            self.check(s, {"reasoning_effort": "high"}, True, "high", *flags)
            self.check(s, {"thinking": False}, False, None, *flags)

    def test_silent_request_generates_reasoning(self):
        # The reply opens inside <think>: forced output before </think> is reasoning, not content.
        with Server() as s:
            r = s.client().chat.completions.create(
                model=s.model, messages=MESSAGES, max_tokens=32,
                extra_body={"deepinfer_test": {"forced_output": "Let me think.</think>Hello."}})
            msg = r.choices[0].message
            self.assertEqual(msg.model_extra.get("reasoning_content"), "Let me think.")
            self.assertEqual(msg.content, "Hello.")


class FlagErrors(unittest.TestCase):
    def test_bad_server_defaults_are_refused_naming_the_key(self):
        err = serve_fails("--backend", "fake", "--default-chat-template-kwargs", '{"thinkng": false}')
        self.assertIn("'thinkng'", err)
        self.assertIn("--default-chat-template-kwargs", err)
        err = serve_fails("--backend", "fake", "--default-chat-template-kwargs", "thinking=false")
        self.assertIn("not a JSON object", err)
        err = serve_fails("--backend", "fake", "--reasoning-effort", "extreme")
        self.assertIn("--reasoning-effort", err)

    def test_unknown_flag_suggests_the_closest(self):
        err = serve_fails("--backend", "fake", "--max-inflgiht", "3")
        self.assertIn("did you mean --max-inflight?", err)
        err = serve_fails("--backend", "fake", "--tensor-paralel-size", "1")
        self.assertIn("did you mean --tensor-parallel-size?", err)

    def test_vllm_flags_refused_name_the_flag_and_what_to_use(self):
        # Tensor parallelism is native (docs/parallelism.md): a degree the job's ranks cannot hold is
        # refused, naming the layout and how to launch it.
        tiny = os.path.join(os.path.dirname(__file__), "..", "..", "..", "models", "tiny-v4")
        err = serve_fails("--model", tiny, "--tensor-parallel-size", "8")
        self.assertIn("tp=8", err)
        self.assertIn("mpirun -np N", err)
        err = serve_fails("--backend", "fake", "--tool-call-parser", "hermes")
        self.assertIn("deepseek_v4", err)
        err = serve_fails("--backend", "fake", "--swap-space", "16")
        self.assertIn("--swap-space", err)
        err = serve_fails("deepseek-ai/DeepSeek-V4-Flash", "--tensor-parallel-size", "1")
        self.assertIn("not a directory", err)
        self.assertIn("--model DIR", err)


@unittest.skipUnless(MODEL_DIR, "needs DEEPINFER_TEST_MODEL (a checkpoint directory to serve)")
class VllmCommandLine(unittest.TestCase):
    def test_typical_vllm_deepseek_v4_command_line_serves(self):
        # `vllm serve MODEL ...` with `deepinfer serve` in place of `vllm serve`: the model positional.
        with Server("--tensor-parallel-size", "1", "--max-model-len", "512", "--reasoning-parser", "deepseek_v4",
                    "--tool-call-parser", "deepseek_v4", "--enable-auto-tool-choice", "--trust-remote-code",
                    "--gpu-memory-utilization", "0.9", "--served-model-name", "ds", "--log-level", "info",
                    positional_model=True) as s:
            self.assertEqual(s.model, "ds")
            self.assertEqual(s.context, 512)
            r = s.client().chat.completions.create(model="ds", messages=MESSAGES, max_tokens=4)
            self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
            log = s.read_log()
            self.assertIn("--gpu-memory-utilization 0.9: ignored", log)
            self.assertIn("--reasoning-parser deepseek_v4: no-op", log)


class Endpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(api_key="k").__enter__()
        cls.auth = {"Authorization": "Bearer k"}

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)

    def test_tokenize_detokenize_round_trip(self):
        s = self.server
        r = requests.post(s.url("/tokenize"), json={"model": s.model, "prompt": "Hello, world"}, headers=self.auth,
                          timeout=30)
        self.assertEqual(r.status_code, 200, r.text)
        t = r.json()
        self.assertEqual(t["count"], len(t["tokens"]))
        self.assertEqual(t["max_model_len"], s.context)
        d = requests.post(s.url("/detokenize"), json={"tokens": t["tokens"]}, headers=self.auth, timeout=30)
        self.assertEqual(d.status_code, 200, d.text)
        self.assertIn("Hello, world", d.json()["prompt"])
        # Needs the key like /v1/*.
        self.assertEqual(requests.post(s.url("/tokenize"), json={"prompt": "x"}, timeout=30).status_code, 401)
        bad = requests.post(s.url("/detokenize"), json={"tokens": [0, 10 ** 9]}, headers=self.auth, timeout=30)
        self.assertEqual(bad.status_code, 400)
        self.assertEqual(bad.json()["error"]["param"], "tokens[1]")

    def test_tokenize_messages_counts_the_chat_prompt(self):
        s = self.server
        client = s.client()
        t = requests.post(s.url("/tokenize"), json={"messages": MESSAGES}, headers=self.auth, timeout=30).json()
        r = client.chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=1)
        self.assertEqual(t["count"], r.usage.prompt_tokens)
        t2 = requests.post(s.url("/tokenize"), json={"messages": MESSAGES, "thinking": False}, headers=self.auth,
                           timeout=30).json()
        self.assertNotEqual(t["tokens"], t2["tokens"])  # thinking vs not renders differently

    def test_version_model_by_id_and_405(self):
        s = self.server
        v = requests.get(s.url("/version"), timeout=30)
        self.assertEqual(v.status_code, 200)
        self.assertRegex(v.json()["version"], r"^\d+\.\d+\.\d+")
        m = s.client().models.retrieve(s.model)
        self.assertEqual(m.id, s.model)
        with self.assertRaises(openai.NotFoundError):
            s.client().models.retrieve("no-such-model")
        r = requests.get(s.url("/v1/chat/completions"), headers=self.auth, timeout=30)
        self.assertEqual(r.status_code, 405)
        self.assertEqual(r.headers["Allow"], "POST")
        r = requests.delete(s.url("/v1/models"), headers=self.auth, timeout=30)
        self.assertEqual(r.status_code, 405)
        self.assertIn("GET", r.headers["Allow"])

    def test_context_overflow_is_400_naming_the_field(self):
        s = self.server
        r = requests.post(s.url("/v1/chat/completions"), headers=self.auth, timeout=60, json={
            "model": s.model, "messages": [{"role": "user", "content": "word " * (s.context + 10)}]})
        self.assertEqual(r.status_code, 400)
        e = r.json()["error"]
        self.assertEqual((e["param"], e["code"]), ("messages", "context_length_exceeded"))
        self.assertIn(str(s.context), e["message"])


if __name__ == "__main__":
    unittest.main()
