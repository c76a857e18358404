"""Fuzzing the request parser over HTTP: mutated and hostile JSON bodies to both endpoints, and malformed
HTTP on raw sockets. Nothing may crash the server; every answer is a well-formed response (an OpenAI
error object for rejections). Bounded: DEEPINFER_FUZZ_CASES bodies (default 5000), fixed seed."""

import copy
import json
import os
import random
import socket
import unittest

import requests

from common import Server, sse_events

CASES = int(os.environ.get("DEEPINFER_FUZZ_CASES", "5000"))

HOSTILE_VALUES = [None, True, False, 0, -1, 1, 2 ** 63, -(2 ** 63), 2 ** 64 + 1, 1e308, -1e308, 1.5, "",
                  "x" * 5000, "\u0000", "\ud7ff\ue000", "<｜DSML｜invoke>", [], {}, [None], {"": None},
                  [[[[[[1]]]]]], {"type": "function"}, "NaN", ["a"] * 50]


def templates(model):
    chat = {"model": model, "max_tokens": 2, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto", "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 1, "n": 1,
        "stop": ["\n"], "logprobs": True, "top_logprobs": 2, "logit_bias": {"5": 1},
        "chat_template_kwargs": {"thinking": True}, "reasoning_effort": "high",
        "response_format": {"type": "json_object"}, "stream": False, "user": "u"}
    comp = {"model": model, "max_tokens": 2, "prompt": ["a", "b"], "logprobs": 1, "echo": False, "n": 1,
            "stream": True, "stream_options": {"include_usage": True}, "presence_penalty": 0.1,
            "frequency_penalty": 0.1, "repetition_penalty": 1.1}
    return [("/v1/chat/completions", chat), ("/v1/completions", comp)]


def paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, prefix + (i,))


def set_path(obj, path, value, delete=False):
    if not path:
        return value
    cur = obj
    for p in path[:-1]:
        cur = cur[p]
    if delete:
        if isinstance(cur, dict):
            del cur[path[-1]]
        else:
            cur.pop(path[-1])
    else:
        cur[path[-1]] = value
    return obj


def structural(rng, base):
    body = json.loads(json.dumps(base))
    for _ in range(rng.randint(1, 3)):
        ps = list(paths(body))[1:]
        if not ps:
            break
        p = rng.choice(ps)
        r = rng.random()
        if r < 0.15:
            body = set_path(body, p, None, delete=True)
        elif r < 0.25 and isinstance(body, dict):
            body[rng.choice(["extra", "deepinfer_test", "best_of", "suffix", "echo"])] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
        else:
            body = set_path(body, p, copy.deepcopy(rng.choice(HOSTILE_VALUES)))
    return json.dumps(body, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def bytewise(rng, base):
    data = bytearray(json.dumps(base).encode())
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        i = rng.randrange(len(data) + 1)
        if op < 0.3 and data:
            data[min(i, len(data) - 1)] = rng.randrange(256)
        elif op < 0.5:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif op < 0.7:
            del data[i:i + rng.randint(1, 10)]
        elif op < 0.85:
            data = data[:i]
        else:
            j = rng.randrange(len(data) + 1)
            data[i:i] = data[min(i, j):max(i, j)][:200]
    return bytes(data)


def hostile():
    yield b"[" * 100000 + b"]" * 100000
    yield b'{"a":' * 5000 + b"1" + b"}" * 5000
    yield b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(200000)) + b"}"
    yield b'{"model":"m","messages":[' + b",".join([b'{"role":"user","content":"x"}'] * 20000) + b"]}"
    yield b'{"model": NaN, "prompt": Infinity}'
    yield b'\xef\xbb\xbf{"model":"m","prompt":"x"}'
    yield b'{"model":"m","prompt":"\xff\xfe\xfd"}'
    yield b'{"model":"m","prompt":"' + b"\\ud800" * 1000 + b'"}'
    yield b'{"model":"m","prompt":[' + b",".join([b"99999999999999999999999"] * 100) + b"]}"
    yield b'{"model":"m","prompt":"' + b"a" * (20 << 20) + b'"}'
    yield b'{"model":"m","prompt":"x","logit_bias":{' + b",".join(b'"%d":1' % i for i in range(5000)) + b"}}"
    yield b"\x00" * 1000
    yield b""


class Fuzz(unittest.TestCase):
    def check_response(self, r):
        self.assertIn(r.status_code, (200, 400, 401, 404, 413, 429), r.text[:300])
        if r.status_code == 200:
            if r.headers.get("Content-Type", "").startswith("text/event-stream"):
                events = list(sse_events(r.text.splitlines()))
                self.assertEqual(events[-1], "[DONE]")
                for e in events[:-1]:
                    json.loads(e)
            else:
                self.assertIn("choices", json.loads(r.text))
        else:
            err = r.json()["error"]
            self.assertIsInstance(err["message"], str)

    def test_bodies(self):
        seed = int(os.environ.get("DEEPINFER_FUZZ_SEED", "1130"))
        rng = random.Random(seed)
        with Server(fake_context=512) as s:
            bases = templates(s.model)
            statuses = {}
            session = requests.Session()
            for i in range(CASES):
                path, base = rng.choice(bases)
                body = structural(rng, base) if rng.random() < 0.6 else bytewise(rng, base)
                r = session.post(s.url(path), data=body, headers={"Content-Type": "application/json"}, timeout=60)
                self.check_response(r)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            for body in hostile():
                for path, _ in bases:
                    r = session.post(s.url(path), data=body, headers={"Content-Type": "application/json"},
                                     timeout=120)
                    self.check_response(r)
            print("fuzz: %d mutated bodies (seed %d), statuses %s" % (CASES, seed, statuses))
            self.assertTrue(s.alive())
            self.assertEqual(requests.get(s.url("/health"), timeout=10).status_code, 200)
            self.assertGreater(statuses.get(400, 0), 0)

    def test_malformed_http(self):
        with Server() as s:
            raw = [
                b"GARBAGE\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"model\"",
                b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nxx\r\n",
                b"POST /v1/completions HTTP/1.1\r\n" + b"X-A: " + b"a" * 100000 + b"\r\n\r\n",
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",
                b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
                b"\xff\xfe\r\n\r\n",
            ]
            for data in raw:
                with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
                    # The server may answer (400 / 431) and close before all of it is sent or before the
                    # write side is shut: a reset or ENOTCONN here is the server refusing it, not a failure.
                    try:
                        sock.sendall(data)
                        sock.shutdown(socket.SHUT_WR)
                        while sock.recv(65536):
                            pass
                    except OSError:
                        pass
                self.assertTrue(s.alive(), data[:60])
            # A stream abandoned halfway must not hurt the server either.
            with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
                body = json.dumps({"model": s.model, "prompt": "x", "max_tokens": 500, "stream": True}).encode()
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                sock.recv(100)
            self.assertEqual(requests.get(s.url("/health"), timeout=10).status_code, 200)


if __name__ == "__main__":
    unittest.main()
