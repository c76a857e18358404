#!/usr/bin/env bash
# Installs what building and testing deepinfer needs on a fresh Debian 12 machine. Idempotent: a package
# already present is not reinstalled, and nothing is fetched when everything is there.
set -euo pipefail

PKGS=(build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libpcre2-dev libcpp-httplib-dev
      python3 python3-venv curl openmpi-bin libopenmpi-dev)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
