"""Starts and stops a `deepinfer serve` process for the Python tests.

Every server listens on 127.0.0.1 on a free port (--port 0 --port-file) and is always killed at the end.
DEEPINFER_BIN is the binary; DEEPINFER_TEST_MODEL, when set, is a model directory served by the real
engine, otherwise the deterministic fake backend runs (--backend fake) in DEEPINFER_FAKE_BIN, the test tree's
deepinfer-fake binary (the product binary does not link the fake backend)."""

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request

BIN = os.environ.get("DEEPINFER_BIN", "build/release/src/cli/deepinfer")
FAKE_BIN = os.environ.get("DEEPINFER_FAKE_BIN", "build/release/tests/server/deepinfer-fake")


def binary_for(args):
    """The binary that serves these `serve` arguments: deepinfer-fake for --backend fake."""
    return FAKE_BIN if "fake" in args and "--backend" in args else BIN
SANITIZED = os.environ.get("DEEPINFER_SANITIZED", "") not in ("", "0")
MODEL_DIR = os.environ.get("DEEPINFER_TEST_MODEL", "")


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class Server:
    def __init__(self, *extra, api_key=None, fake_step_us=500, fake_context=4096, env=None, model_dir=None,
                 positional_model=False):
        """model_dir: None serves DEEPINFER_TEST_MODEL (or the fake backend when unset), "" the fake backend,
        else that model directory. positional_model: pass it as `serve DIR` (vLLM's form), not --model DIR."""
        self.extra = list(extra)
        self.model_dir = MODEL_DIR if model_dir is None else model_dir
        self.positional_model = positional_model
        self.env = dict(os.environ, **(env or {}))
        self.api_key = api_key
        self.fake_step_us = fake_step_us
        self.fake_context = fake_context
        self.proc = None

    def __enter__(self):
        self.tmp = tempfile.TemporaryDirectory()
        port_file = os.path.join(self.tmp.name, "port")
        cmd = [BIN if self.model_dir else FAKE_BIN, "serve"]
        cmd += [self.model_dir] if self.model_dir and self.positional_model else []
        cmd += ["--host", "127.0.0.1", "--port", "0", "--port-file", port_file, "--enable-test-hooks",
                "--log-level", "warn"]
        if self.model_dir:
            if not self.positional_model:
                cmd += ["--model", self.model_dir]
        else:
            cmd += ["--backend", "fake", "--fake-step-us", str(self.fake_step_us),
                    "--fake-context", str(self.fake_context)]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        cmd += self.extra
        self.log = open(os.path.join(self.tmp.name, "log"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early: " + self.read_log())
            text = read_text(port_file)
            if text.strip():
                self.port = int(text.strip())
                try:
                    with urllib.request.urlopen(self.url("/health"), timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
            time.sleep(0.05)
        else:
            self.kill()
            raise RuntimeError("server did not start: " + self.read_log())
        try:
            models = json.loads(self.get("/v1/models"))
        except Exception:
            self.kill()
            raise
        self.model = models["data"][0]["id"]
        self.context = models["data"][0]["max_model_len"]
        return self

    def __exit__(self, exc_type, *exc):
        code = self.kill()
        log = self.read_log()
        self.log.close()
        self.tmp.cleanup()
        # A clean shutdown on SIGTERM exits 0; under ASan a leak found at exit makes it non-zero.
        if exc_type is None and code != 0:
            raise AssertionError("server exited with %s on SIGTERM:\n%s" % (code, log))

    def kill(self):
        """Stops the server (SIGTERM, then SIGKILL after 30 s); returns its exit code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return "a hang (killed)"
        return self.proc.returncode if self.proc else 0

    def alive(self):
        return self.proc.poll() is None

    def read_log(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def get(self, path):
        req = urllib.request.Request(self.url(path))
        if self.api_key:
            req.add_header("Authorization", "Bearer " + self.api_key)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def metrics(self):
        """Parses /metrics into {name{labels}: value}."""
        out = {}
        for line in self.get("/metrics").splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
        return out

    def client(self, **kw):
        import openai
        kw.setdefault("api_key", self.api_key or "none")
        return openai.OpenAI(base_url=self.url("/v1"), max_retries=0, timeout=120, **kw)


def sse_events(lines):
    """Yields the data payloads of an SSE stream given its lines (bytes or str)."""
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode()
        if line.startswith("data: "):
            yield line[6:]
