#!/usr/bin/env bash
# ctest entry: validates structured_sampling's output in the pinned test venv (jsonschema).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="$("$root/scripts/setup-pytest.sh")"
exec "$root/$py" "$here/validate_samples.py" "$1"
