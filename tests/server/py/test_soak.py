"""The soak, bounded (issue 13): tools/bench/soak.py with 200 streams for 30 s on the fake backend. Every
request must complete exactly once (0 lost, 0 duplicated) and the server's RSS must stay flat (±5%) after
the warm-up. The full run (1,000 streams for 10 minutes) is a benchmark: docs/benchmarks.md."""

import os
import subprocess
import sys
import unittest

from common import FAKE_BIN

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
STREAMS = os.environ.get("DEEPINFER_SOAK_STREAMS", "200")
MINUTES = os.environ.get("DEEPINFER_SOAK_MINUTES", "0.5")


class Soak(unittest.TestCase):
    def test_bounded_soak(self):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench", "soak.py"), "--bin", FAKE_BIN,
                            "--streams", STREAMS, "--minutes", MINUTES], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
        out = p.stdout.decode(errors="replace")
        print("\n" + out)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn(" 0 lost, 0 duplicated", out)
        self.assertIn("PASS", out)


if __name__ == "__main__":
    unittest.main()
