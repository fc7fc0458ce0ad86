#!/usr/bin/env bash
# Set up a fresh machine for the auditor: Java 17 (Spark's JVM), a virtual environment in
# .venv, and the package with its test dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing Java 17 (needed by Spark)" >&2
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q openjdk-17-jre-headless
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# Record the classes Spark's JVM loads (once per machine, ~60 s): later audits start
# faster.
.venv/bin/auditor warm-up || echo "setup: warm-up failed; audits still work, they start slower" >&2
