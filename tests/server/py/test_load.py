"""Load on loopback: rounds of 220 concurrent streaming requests of mixed lengths (chat and completions,
some with n = 2). Every stream must be well formed and complete, none lost or duplicated; the server's
memory must come back to its baseline after each round; /metrics must agree with what was sent.

Memory: glibc's per-thread caches (tcache) keep freed chunks counted as in use, and with hundreds of
HTTP threads they grow for a while as threads see new size classes, which looks like a leak but is not.
The server runs with tcache off and one arena, so that heap in use (mallinfo2, /metrics) and RSS must
return to the baseline measured after a warm-up round, to within a few KiB: any per-request leak shows."""

import json
import os
import random
import threading
import time
import unittest

import requests

from common import SANITIZED, Server, sse_events

CONCURRENCY = int(os.environ.get("DEEPINFER_LOAD_CONCURRENCY", "220"))
ROUNDS = int(os.environ.get("DEEPINFER_LOAD_ROUNDS", "1" if SANITIZED else "2"))  # ASan: ~100 s a round


def make_request(model, rng):
    kind = rng.choice(["chat", "completion"])
    n = 2 if rng.random() < 0.15 else 1
    max_tokens = rng.randint(24, 96)
    text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "epsilon"]) for _ in range(rng.randint(1, 60)))
    body = {"model": model, "max_tokens": max_tokens, "n": n, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": rng.choice([0.0, 0.7, 1.0]),
            "seed": rng.randint(0, 1 << 30)}
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": text}]
        return "/v1/chat/completions", body
    body["prompt"] = text
    return "/v1/completions", body


def run_one(server, path, body, result):
    """Sends one streaming request and checks the stream; stores a dict in result."""
    result["start"] = time.time()
    r = requests.post(server.url(path), json=body, stream=True, timeout=(30, 300))
    result["status"] = r.status_code
    if r.status_code != 200:
        result["error"] = r.text
        return
    result["content_type"] = r.headers.get("Content-Type", "")
    events = list(sse_events(r.iter_lines()))
    result["end"] = time.time()
    result["events"] = events


def check_stream(test, path, body, result, ids):
    test.assertEqual(result.get("status"), 200, result.get("error"))
    test.assertTrue(result["content_type"].startswith("text/event-stream"))
    events = result["events"]
    test.assertEqual(events[-1], "[DONE]")
    test.assertEqual(events.count("[DONE]"), 1)
    chunks = [json.loads(e) for e in events[:-1]]
    test.assertNotIn("error", chunks[-1])
    stream_ids = {c["id"] for c in chunks}
    test.assertEqual(len(stream_ids), 1)
    ids.append(stream_ids.pop())
    usage = chunks[-1]["usage"]
    test.assertEqual(chunks[-1]["choices"], [])
    n = body["n"]
    finishes = {}
    for c in chunks[:-1]:
        for ch in c["choices"]:
            if ch["finish_reason"] is not None:
                test.assertNotIn(ch["index"], finishes)
                finishes[ch["index"]] = ch["finish_reason"]
    test.assertEqual(sorted(finishes), list(range(n)))
    test.assertLessEqual(usage["completion_tokens"], n * body["max_tokens"])
    if all(f == "length" for f in finishes.values()):
        test.assertEqual(usage["completion_tokens"], n * body["max_tokens"])
    test.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + usage["completion_tokens"])
    if path == "/v1/chat/completions":
        firsts = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("role") == "assistant"]
        test.assertEqual(len(firsts), n)
    return usage


def peak_overlap(results):
    edges = sorted([(r["start"], 1) for r in results if "end" in r] + [(r["end"], -1) for r in results if "end" in r])
    cur = peak = 0
    for _, d in edges:
        cur += d
        peak = max(peak, cur)
    return peak


class Load(unittest.TestCase):
    def run_round(self, server, rng):
        reqs = [make_request(server.model, rng) for _ in range(CONCURRENCY)]
        results = [dict() for _ in reqs]
        barrier = threading.Barrier(len(reqs))

        def worker(i):
            barrier.wait()
            try:
                run_one(server, reqs[i][0], reqs[i][1], results[i])
            except Exception as e:  # reported by the checks below
                results[i]["error"] = repr(e)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=400)
        self.assertFalse(any(t.is_alive() for t in threads), "requests still running after 400 s")
        elapsed = time.time() - t0
        ids, prompt, completion = [], 0, 0
        for (path, body), res in zip(reqs, results):
            usage = check_stream(self, path, body, res, ids)
            prompt += usage["prompt_tokens"]
            completion += usage["completion_tokens"]
        self.assertEqual(len(set(ids)), len(reqs))  # none lost, none duplicated
        counts = {p: sum(1 for q, _ in reqs if q == p) for p in ("/v1/chat/completions", "/v1/completions")}
        return {"prompt": prompt, "completion": completion, "counts": counts, "elapsed": elapsed,
                "peak": peak_overlap(results)}

    def test_concurrent_streams(self):
        rng = random.Random(int(os.environ.get("DEEPINFER_LOAD_SEED", "20261130")))
        env = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0", "MALLOC_ARENA_MAX": "1"}
        with Server("--max-inflight", "1024", "--http-threads", "256", fake_step_us=10000, env=env) as s:
            # Warm-up: thread stacks, allocator arenas, caches, and the high-water marks of containers sized
            # by the load (connections by descriptor, queues), which a busier moment can raise once more:
            # two rounds, so the baseline is taken after the most either reached. A leak still grows every
            # measured round below.
            self.run_round(s, rng)
            self.run_round(s, rng)
            time.sleep(1.0)
            baseline = s.rss_kib()
            heap0 = s.metrics().get("deepinfer_heap_in_use_bytes", 0)
            for round_no in range(ROUNDS):
                m0 = s.metrics()
                stats = self.run_round(s, rng)
                deadline = time.time() + 30
                while s.metrics().get("deepinfer_http_requests_in_flight", 1) > 0 and time.time() < deadline:
                    time.sleep(0.1)
                time.sleep(1.0)
                m1 = s.metrics()
                rss = s.rss_kib()
                heap = m1.get("deepinfer_heap_in_use_bytes", 0)
                # On a loaded machine (CI runs tests side by side) the last connections' buffers can still be
                # on their way out a second after the last request ended. Poll a while longer before judging:
                # memory that is held for good never comes back. (Until session 21 this failed ~1 CI run in
                # 10 at +627-738 KiB that never came back: the matmuls' per-thread scratch grew with the
                # longest step seen, and a busier round batched more tokens into one step than the warm-up
                # had. configure_runtime now plans that scratch; tests/model/zero_alloc.cpp checks it. A CI
                # run after that fix still failed once at +68 KiB: the engine's per-row step buffers, the
                # logits above all, grew with the most rows a step had sampled; the engine now reserves them
                # for max_num_seqs rows.)
                deadline = time.time() + 15
                while (heap > heap0 + 64 * 1024 or rss > baseline + 4 * 1024) and time.time() < deadline:
                    time.sleep(0.5)
                    m1 = s.metrics()
                    rss = s.rss_kib()
                    heap = m1.get("deepinfer_heap_in_use_bytes", 0)
                print("round %d: %d streams, peak %d open at once, %.1f s, %d prompt + %d completion tokens, "
                      "RSS %d KiB (baseline %d KiB), heap in use %d KiB (baseline %d KiB)" % (
                          round_no, CONCURRENCY, stats["peak"], stats["elapsed"], stats["prompt"],
                          stats["completion"], rss, baseline, heap // 1024, heap0 // 1024))
                self.assertGreaterEqual(stats["peak"], 200)

                def delta(key):
                    return m1.get(key, 0) - m0.get(key, 0)
                for path, count in stats["counts"].items():
                    self.assertEqual(delta('deepinfer_requests_total{endpoint="%s",status="200"}' % path), count)
                self.assertEqual(delta("deepinfer_prompt_tokens_total"), stats["prompt"])
                self.assertEqual(delta("deepinfer_generation_tokens_total"), stats["completion"])
                self.assertEqual(delta("deepinfer_e2e_request_latency_seconds_count"), CONCURRENCY)
                self.assertEqual(delta("deepinfer_time_to_first_token_seconds_count"), CONCURRENCY)
                for gauge in ("deepinfer_http_requests_in_flight", "deepinfer_num_requests_running",
                              "deepinfer_num_requests_waiting", "deepinfer_kv_cache_usage_ratio"):
                    self.assertEqual(m1[gauge], 0, gauge)
                if not SANITIZED:  # ASan's quarantine holds memory; its leak check at exit covers leaks there
                    self.assertLessEqual(heap, heap0 + 64 * 1024, "heap in use did not return to its baseline")
                    self.assertLessEqual(rss, baseline + 4 * 1024, "RSS did not return to its baseline")
            self.assertTrue(s.alive())


if __name__ == "__main__":
    unittest.main()
