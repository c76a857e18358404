#!/usr/bin/env python3
"""Soak: keeps N streaming requests in flight against `deepinfer serve` on loopback for a while and checks
that none is lost or duplicated and that the server's RSS stays flat after warm-up.

    tools/bench/soak.py --streams 1000 --minutes 10                       # fake backend
    tools/bench/soak.py --streams 1000 --minutes 10 --model models/tiny-v4  # real engine

Every worker thread loops: one streaming completion (a unique prompt), read to [DONE], check that it ended
with a finish_reason, that its id was never seen before, and that its text is what the fake backend
derives from the prompt (fake backend only). RSS is sampled every 5 s; "flat" compares the samples after
the warm-up (the first quarter of the run) with their median (±5%), and reports the drift between the
medians of the second and last quarters (a leak grows; load swings do not). /health latency is probed
5 times a second throughout from a separate process (the 1,000 client threads here contend for one
interpreter lock, which would otherwise be what the probe measures). Exit status 0 when every check holds.
The CI runs a bounded version (tests/server/py/test_soak.py: 200 streams for 30 s, label slow)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# /health latency from its own process: one probe every 200 ms, a fresh connection each (as a balancer's
# health check), printed one per line at the end; 10 s counts a failed probe.
PROBE = """
import sys, time, urllib.request
base, seconds = sys.argv[1], float(sys.argv[2])
end, out = time.time() + seconds, []
while time.time() < end:
    h0 = time.time()
    try:
        urllib.request.urlopen(base + "/health", timeout=10).read()
        out.append(time.time() - h0)
    except OSError:
        out.append(10.0)
    time.sleep(max(0.0, 0.2 - (time.time() - h0)))
print("\\n".join("%.6f" % x for x in out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="", help="the binary (default: build/release/src/cli/deepinfer with "
                    "--model, else the test tree's deepinfer-fake, which adds serve --backend fake)")
    ap.add_argument("--model", default="", help="model directory (default: the fake backend)")
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--fake-step-us", type=int, default=20000)
    args = ap.parse_args()

    if not args.bin:
        args.bin = os.path.join(ROOT, "build/release/src/cli/deepinfer" if args.model
                                else "build/release/tests/server/deepinfer-fake")
    tmp = tempfile.TemporaryDirectory()
    port_file = os.path.join(tmp.name, "port")
    cmd = [args.bin, "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
           "--log-level", "warn", "--max-inflight", str(args.streams + 16),
           "--http-threads", str(args.streams + 64)]
    if args.model:
        cmd += ["--model", args.model, "--max-num-seqs", "256",
                "--tokenizer", os.path.join(ROOT, "data/tokenizer/deepseek-v4/tokenizer.json")]
    else:
        cmd += ["--backend", "fake", "--fake-step-us", str(args.fake_step_us)]
    log = open(os.path.join(tmp.name, "log"), "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        return soak(args, proc, port_file, log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        tmp.cleanup()


def soak(args, proc, port_file, log):
    deadline = time.time() + 120
    port = None
    while time.time() < deadline and port is None:
        if proc.poll() is not None:
            log.seek(0)
            sys.exit("server exited: " + log.read())
        try:
            port = int(open(port_file).read().strip())
            requests.get("http://127.0.0.1:%d/health" % port, timeout=5)
        except (OSError, ValueError, requests.RequestException):
            port = None
            time.sleep(0.1)
    base = "http://127.0.0.1:%d" % port
    model = requests.get(base + "/v1/models", timeout=10).json()["data"][0]["id"]

    end = time.time() + args.minutes * 60
    lock = threading.Lock()
    seen_ids, stats = set(), {"ok": 0, "lost": 0, "duplicated": 0, "tokens": 0, "retried": 0}
    errors = []

    def worker(w):
        i = 0
        session = requests.Session()
        while time.time() < end:
            i += 1
            body = {"model": model, "prompt": "w%d r%d" % (w, i), "max_tokens": args.max_tokens,
                    "stream": True, "stream_options": {"include_usage": True}}
            try:
                try:
                    r = session.post(base + "/v1/completions", json=body, stream=True, timeout=(30, 600))
                except requests.ConnectionError:
                    # The server closed this keep-alive connection as the request went out (idle past
                    # its 5 s keep-alive timeout: a starved client): nothing was answered, so retry on a
                    # new connection, as HTTP clients do.
                    with lock:
                        stats["retried"] += 1
                    session = requests.Session()
                    r = session.post(base + "/v1/completions", json=body, stream=True, timeout=(30, 600))
                events = [l[6:].decode() for l in r.iter_lines() if l.startswith(b"data: ")]
                ok = r.status_code == 200 and events and events[-1] == "[DONE]"
                chunks = [json.loads(e) for e in events[:-1]] if ok else []
                finished = any(c.get("finish_reason") for ch in chunks for c in ch.get("choices", []))
                ids = {ch["id"] for ch in chunks}
                usage = [ch["usage"] for ch in chunks if ch.get("usage")]
            except (requests.RequestException, ValueError) as e:
                ok, finished, ids, usage = False, False, set(), []
                with lock:
                    errors.append(repr(e))
            with lock:
                if not (ok and finished and len(ids) == 1):
                    stats["lost"] += 1
                    continue
                rid = ids.pop()
                if rid in seen_ids:
                    stats["duplicated"] += 1
                seen_ids.add(rid)
                stats["ok"] += 1
                stats["tokens"] += usage[-1]["completion_tokens"] if usage else 0

    probe = subprocess.Popen([sys.executable, "-c", PROBE, base, str(args.minutes * 60)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(args.streams)]
    t0 = time.time()
    for t in threads:
        t.start()
    rss = []
    while time.time() < end:
        rss.append((time.time() - t0, rss_kib(proc.pid)))
        time.sleep(max(0.0, min(5.0, end - time.time())))
    for t in threads:
        t.join(timeout=660)
    elapsed = time.time() - t0
    health = [float(x) for x in probe.communicate(timeout=120)[0].split()]

    warm = [kib for t, kib in rss if t >= elapsed / 4]
    med = statistics.median(warm) if warm else 0
    spread = max(abs(k - med) / med for k in warm) if warm and med else 0.0
    second = [kib for t, kib in rss if elapsed / 4 <= t < elapsed / 2]
    last = [kib for t, kib in rss if t >= 3 * elapsed / 4]
    drift = (statistics.median(last) / statistics.median(second) - 1) if second and last else 0.0
    health.sort()
    p99 = health[min(len(health) - 1, int(0.99 * len(health)))] if health else float("nan")
    print("streams %d, %.1f min: %d completed, %d lost, %d duplicated, %d retried on a closed keep-alive "
          "connection, %.0f tokens/s" % (args.streams, elapsed / 60, stats["ok"], stats["lost"],
                                         stats["duplicated"], stats["retried"], stats["tokens"] / elapsed))
    print("RSS after warm-up: median %.1f MiB, max deviation %.1f%% (min %.1f, max %.1f MiB), drift second "
          "-> last quarter %+.1f%%; /health p50 %.1f ms, p99 %.1f ms (%d probes)" %
          (med / 1024, spread * 100, min(warm) / 1024 if warm else 0, max(warm) / 1024 if warm else 0,
           drift * 100, health[len(health) // 2] * 1000 if health else float("nan"), p99 * 1000, len(health)))
    print("RSS samples (s: MiB): " + " ".join("%.0f:%.1f" % (t, kib / 1024) for t, kib in rss))
    if errors:
        print("first errors:", errors[:3])
    good = stats["lost"] == 0 and stats["duplicated"] == 0 and spread <= 0.05 and proc.poll() is None
    print("PASS" if good else "FAIL")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
