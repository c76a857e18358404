"""Issue 12's acceptance for structured outputs, through the server: every fixture in tests/structured/data
(JSON Schemas, regexes, GBNF grammars, tool sets) is requested against the random-weight tiny model with the
real V4 vocabulary at temperature 1 with several seeds, and EVERY output is checked with a validator that
shares no code with the compiler: the `jsonschema` package (with its format checker), Python's
re.fullmatch, the grammar fixture's `# check:` line, and for tool calls the allowed names and each call's
arguments against the tool's parameters.

Random weights close a string only when one of the few hundred tokens holding a `"` is drawn among ~126,000
allowed ones, so an output would run to thousands of tokens (the C++ driver, structured_sampling, samples
those to the end without a token limit). Here every request has a small max_tokens (MAX_TOKENS) and nothing else
helps it end (no logit_bias): the engine's budget rule (docs/structured-outputs.md, "Budget") keeps only
tokens after which the grammar can still end in the tokens left, so nearly every output runs into its budget
and must still close in time. EVERY output must finish (`stop`, or `tool_calls`) and validate: an output cut
by max_tokens (finish "length") fails the test.

    DEEPINFER_ACCEPTANCE=full   all fixtures x 3 seeds (ctest server_py_structured_acceptance, label slow)
    DEEPINFER_ACCEPTANCE=quick  every 16th fixture x 1 seed (default)
"""

import ast
import concurrent.futures
import json
import os
import re
import tempfile
import unittest

import jsonschema
import requests

from common import MODEL_DIR, Server

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "structured", "data")
FULL = os.environ.get("DEEPINFER_ACCEPTANCE", "quick") == "full"
SEEDS = [101, 202, 303] if FULL else [101]
STRIDE = 1 if FULL else 16
WORKERS = 16
# Above every fixture's shortest output in bytes, which bounds it in tokens (the budget rule counts bytes):
# at most 181 for the schemas, regexes and grammars, but up to 824 for a DSML tool call, whose markup is
# long in bytes (`<｜DSML｜parameter name="..." string="true">`) though short in tokens.
MAX_TOKENS = {"json_schema": 256, "regex": 256, "grammar": 256, "tool_choice": 1024}
CONTEXT = 4096  # the tiny model's config says 1,024; tool prompts alone take ~600 of those


def real_vocabulary(model_dir):
    if not model_dir:
        return False
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f).get("vocab_size", 0) >= 129280


def longer_context_copy(model_dir, tmp):
    """The model with max_position_embeddings raised to CONTEXT (its files linked, config.json rewritten):
    random weights do not care, and outputs get room to finish."""
    for name in os.listdir(model_dir):
        if name != "config.json":
            os.symlink(os.path.join(os.path.abspath(model_dir), name), os.path.join(tmp, name))
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    config["max_position_embeddings"] = max(config.get("max_position_embeddings", 0), CONTEXT)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f)
    return tmp


def read(*parts):
    with open(os.path.join(DATA, *parts), encoding="utf-8") as f:
        return f.read()


def fixtures(sub, ext):
    names = sorted(n for n in os.listdir(os.path.join(DATA, sub)) if n.endswith(ext))
    return names[::STRIDE]


def openapi_nullable(schema):
    """OpenAPI 3.0's `nullable: true`, which the compiler accepts (docs/structured-outputs.md) and JSON
    Schema validators ignore, as the JSON Schema it means: `null` added to the node's `type`."""
    if isinstance(schema, list):
        return [openapi_nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi_nullable(v) for k, v in schema.items()}
    if out.get("nullable") is True and "type" in out:
        t = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = t + ["null"] if "null" not in t else t
    return out


def validator(schema):
    schema = openapi_nullable(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def grammar_check(source, output):
    for line in source.splitlines():
        if line.startswith("# check:"):
            spec = line[len("# check:"):].strip()
            if spec == "json":
                json.loads(output)
            elif spec == "python-eval":
                ast.parse(output, mode="eval")
            elif spec.startswith("regex "):
                if re.fullmatch(spec[len("regex "):], output, re.DOTALL) is None:
                    raise ValueError("does not match " + spec)
            else:
                raise ValueError("unknown check " + spec)
            return
    raise ValueError("fixture has no '# check:' line")


@unittest.skipUnless(real_vocabulary(MODEL_DIR), "needs the engine backend on a model with the real V4 vocabulary")
class Acceptance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = Server(model_dir=longer_context_copy(MODEL_DIR, cls.tmp.name)).__enter__()
        cls.model = cls.server.model
        cls.totals = {}

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()
        print("\nacceptance totals (kind: requests / finished / valid / cut by max_tokens):", flush=True)
        for kind, t in sorted(cls.totals.items()):
            print(f"  {kind}: {t['requests']} / {t['finished']} / {t['valid']} / {t['length']}", flush=True)

    def run_all(self, kind, jobs):
        """jobs: (label, request body, check(response choice) -> None or raises). Runs them concurrently (the
        engine batches them); fails on any invalid output and on any output cut by max_tokens."""

        def one(job):
            label, body, check = job
            body = dict(body, model=self.model, temperature=1.0, max_tokens=MAX_TOKENS[kind])
            body.setdefault("messages", [{"role": "user", "content": "Answer."}])
            # The grammar from the first token (thinking then constraint is test_structured.py's).
            body.setdefault("chat_template_kwargs", {"thinking": False})
            r = requests.post(self.server.url("/v1/chat/completions"), json=body, timeout=600)
            if r.status_code != 200:
                return label, "error", f"HTTP {r.status_code}: {r.text[:300]}"
            choice = r.json()["choices"][0]
            if choice["finish_reason"] == "length":
                return label, "length", None
            try:
                check(choice)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                msg = choice["message"]
                return label, "invalid", f"{type(e).__name__}: {str(e)[:300]} | {json.dumps(msg)[:400]}"
            return label, "valid", None

        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(one, jobs))
        t = {"requests": len(results), "finished": sum(r[1] in ("valid", "invalid") for r in results),
             "valid": sum(r[1] == "valid" for r in results), "length": sum(r[1] == "length" for r in results)}
        type(self).totals[kind] = t
        print(f"\n{kind}: {t}", flush=True)
        bad = [f"{label}: {status}: {msg}" for label, status, msg in results if status != "valid"]
        self.assertEqual(bad, [], "\n".join(bad))

    def test_json_schema(self):
        jobs = []
        for name in fixtures("schemas", ".json"):
            schema = json.loads(read("schemas", name))
            v = validator(schema)

            def check(choice, v=v):
                v.validate(json.loads(choice["message"]["content"]))

            for seed in SEEDS:
                jobs.append((f"{name} seed {seed}", {"seed": seed, "response_format": {
                    "type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}},
                    check))
        self.assertGreaterEqual(len(jobs), 100 * len(SEEDS) if FULL else 5)
        self.run_all("json_schema", jobs)

    def test_regex(self):
        patterns = [p for p in read("regex.txt").splitlines() if p and not p.startswith("#")]
        patterns = patterns[::STRIDE]
        jobs = []
        for i, pattern in enumerate(patterns):
            def check(choice, pattern=pattern):
                out = choice["message"]["content"]
                if re.fullmatch(pattern, out) is None:
                    raise ValueError(f"{out!r} does not match {pattern!r}")

            for seed in SEEDS:
                jobs.append((f"regex {pattern!r} seed {seed}", {"seed": seed, "guided_regex": pattern}, check))
        self.assertGreaterEqual(len(patterns), 20 if FULL else 2)
        self.run_all("regex", jobs)

    def test_grammar(self):
        jobs = []
        names = fixtures("gbnf", ".gbnf")
        for name in names:
            source = read("gbnf", name)

            def check(choice, source=source):
                grammar_check(source, choice["message"]["content"])

            for seed in SEEDS:
                jobs.append((f"{name} seed {seed}", {"seed": seed, "guided_grammar": source}, check))
        self.assertGreaterEqual(len(names), 20 if FULL else 2)
        self.run_all("grammar", jobs)

    def test_tool_choice(self):
        jobs = []
        names = fixtures("tools", ".json")
        for name in names:
            spec = json.loads(read("tools", name))
            tools = spec["tools"]
            params = {t["function"]["name"]: validator(t["function"].get("parameters", {})) for t in tools}
            only = spec.get("only") or []
            single = spec.get("max_calls") == 1
            # The fixture's own choice (named when it names one tool) with every seed, and once more named
            # with its last tool (one seed).
            variants = [(only[0] if len(only) == 1 else None, single)]
            if not only:
                variants.append((tools[-1]["function"]["name"], single))
            for named, single_call in variants:
                allowed = [named] if named else list(params)
                choice = {"type": "function", "function": {"name": named}} if named else "required"

                def check(c, allowed=allowed, single_call=single_call, params=params):
                    if c["finish_reason"] != "tool_calls":
                        raise ValueError("finish " + c["finish_reason"])
                    calls = c["message"].get("tool_calls") or []
                    if not calls:
                        raise ValueError("no tool call")
                    if single_call and len(calls) != 1:
                        raise ValueError(f"{len(calls)} calls with parallel_tool_calls false")
                    for call in calls:
                        fn = call["function"]
                        if fn["name"] not in allowed:
                            raise ValueError(f"call to {fn['name']!r}, allowed {allowed}")
                        params[fn["name"]].validate(json.loads(fn["arguments"]))

                for seed in SEEDS if not (named and not only) else SEEDS[:1]:
                    jobs.append((f"{name} {choice} seed {seed}", {
                        "seed": seed, "tools": tools, "tool_choice": choice,
                        "parallel_tool_calls": not single_call}, check))
        self.assertGreaterEqual(len(names), 30 if FULL else 2)
        self.run_all("tool_choice", jobs)


if __name__ == "__main__":
    unittest.main()
