#!/usr/bin/env bash
# Set up a fresh machine for the auditor: Java 17 (Spark's JVM), a virtual environment in
# .venv, and the package with its test dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing Java 17 (needed by Spark)" >&2
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q openjdk-17-jdk-headless
elif ! command -v javac >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    # The JDK's compiler builds the auditor's jar (auditor/localjar.py) at warm-up; without
    # it audits still run, on Hadoop's local file system (a process per file written).
    echo "setup: installing Java 17's compiler (for the auditor's jar)" >&2
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q openjdk-17-jdk-headless; } \
        || echo "setup: could not install javac; audits use Hadoop's local file system" >&2
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# Build the auditor's jar and record the classes Spark's JVM loads (once per
# machine, ~40 s): later audits start and write faster.
.venv/bin/auditor warm-up || echo "setup: warm-up failed; audits still work, they start slower" >&2
