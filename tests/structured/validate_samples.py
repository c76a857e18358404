"""Validates every sample structured_sampling wrote, with validators independent of the C++ code:
JSON Schema samples with the `jsonschema` package (formats checked where it has a checker), regex samples
with Python's re.fullmatch, GBNF samples with the checker named on the fixture's `# check:` line
(`regex <pattern>`, `json`, or `python-eval`: the text parses as a Python expression); tool-call samples
(parsed by the C++ DSML parser into name + arguments, as the server returns them): every call names an
allowed tool, respects max_calls, and its arguments validate against that tool's parameters schema.

    python validate_samples.py samples.jsonl
"""
import ast
import json
import re
import sys

import jsonschema



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

def gbnf_check(source, output):
    for line in source.splitlines():
        if line.startswith("# check:"):
            spec = line[len("# check:"):].strip()
            if spec == "json":
                json.loads(output)
                return
            if spec == "python-eval":
                ast.parse(output, mode="eval")
                return
            if spec.startswith("regex "):
                if re.fullmatch(spec[len("regex "):], output, re.DOTALL) is None:
                    raise ValueError("does not match " + spec)
                return
            raise ValueError("unknown check " + spec)
    raise ValueError("fixture has no '# check:' line")


def main(path):
    counts = {}
    failures = []
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    for r in records:
        kind, name, out = r["kind"], r["name"], r["output"]
        counts[kind] = counts.get(kind, 0) + 1
        try:
            if not r["finished"]:
                raise ValueError("sampling did not reach the end token")
            if kind == "schema":
                schema = openapi_nullable(json.loads(r["source"]))
                cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                cls.check_schema(schema)
                cls(schema, format_checker=cls.FORMAT_CHECKER).validate(json.loads(out))
            elif kind == "regex":
                if re.fullmatch(r["source"], out) is None:
                    raise ValueError("re.fullmatch failed")
            elif kind == "gbnf":
                gbnf_check(r["source"], out)
            elif kind == "tools":
                spec = json.loads(r["source"])
                tools = {t["function"]["name"]: t["function"].get("parameters", {}) for t in spec["tools"]}
                allowed = spec.get("only") or list(tools)
                calls = r["calls"]
                if not calls:
                    raise ValueError("no tool call")
                if spec.get("max_calls") and len(calls) > spec["max_calls"]:
                    raise ValueError(f"{len(calls)} calls, max_calls {spec['max_calls']}")
                for c in calls:
                    if c["name"] not in allowed:
                        raise ValueError(f"call to {c['name']!r}, allowed {allowed}")
                    schema = openapi_nullable(tools[c["name"]])
                    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                    cls(schema, format_checker=cls.FORMAT_CHECKER).validate(json.loads(c["arguments"]))
            else:
                raise ValueError("unknown kind " + kind)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failures.append(f"{name} seed {r['seed']}: {type(e).__name__}: {str(e)[:300]}\n  output: {out[:300]!r}")
    for fl in failures:
        print("FAIL", fl)
    print(f"{len(records)} samples ({counts}), {len(failures)} invalid")
    schemas = len({r["name"] for r in records if r["kind"] == "schema"})
    toolsets = len({r["name"] for r in records if r["kind"] == "tools"})
    if len(records) == 0:
        print("no samples")
        return 1
    print(f"{schemas} distinct schemas, {toolsets} tool sets")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
