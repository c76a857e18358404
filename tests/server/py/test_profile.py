"""serve --profile: the op census of every forward, exported on /metrics (deepinfer_op_*) and printed at exit.
Runs on the real engine (DEEPINFER_TEST_MODEL); without --profile the series are absent."""

import re
import unittest

import requests

from common import MODEL_DIR, Server


def completion(s, n):
    r = requests.post(s.url("/v1/completions"), timeout=120,
                      json={"model": s.model, "prompt": "hello world", "max_tokens": n, "temperature": 0})
    r.raise_for_status()
    return r.json()["usage"]["completion_tokens"]


@unittest.skipUnless(MODEL_DIR, "needs the engine backend (DEEPINFER_TEST_MODEL)")
class Profile(unittest.TestCase):
    def test_metrics_count_every_forward_and_grow_with_work(self):
        with Server("--profile") as s:
            n1 = completion(s, 4)
            m1 = s.metrics()
            steps1 = m1["deepinfer_forward_steps_total"]
            # The prefill gives the first token, one decode step each of the others.
            self.assertGreaterEqual(n1, 1)
            self.assertGreaterEqual(steps1, n1)
            for op in ("linear", "sparse_attention", "moe_experts", "lm_head"):
                self.assertGreater(m1['deepinfer_op_calls_total{op="%s"}' % op], 0, op)
                self.assertGreater(m1['deepinfer_op_seconds_total{op="%s"}' % op], 0, op)
                self.assertGreater(m1['deepinfer_op_bytes_total{op="%s"}' % op], 0, op)
            # The op times are part of the forwards' time.
            op_seconds = sum(v for k, v in m1.items() if k.startswith("deepinfer_op_seconds_total"))
            self.assertLessEqual(op_seconds, m1["deepinfer_forward_seconds_total"] * 1.05 + 1e-3)
            n2 = completion(s, 8)
            m2 = s.metrics()
            self.assertGreaterEqual(m2["deepinfer_forward_steps_total"], steps1 + n2)
            self.assertGreater(m2['deepinfer_op_calls_total{op="lm_head"}'],
                               m1['deepinfer_op_calls_total{op="lm_head"}'])
            s.kill()
            log = s.read_log()
        # The census table at exit: a header line and one row per op that ran.
        self.assertIn("profile: serve", log)
        self.assertRegex(log, re.compile(r"^\s+lm_head\s+\d+", re.M))

    def test_no_profile_no_series(self):
        with Server() as s:
            completion(s, 2)
            self.assertFalse([k for k in s.metrics() if k.startswith("deepinfer_op_")])


if __name__ == "__main__":
    unittest.main()
