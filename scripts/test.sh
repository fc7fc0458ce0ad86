#!/usr/bin/env bash
# Set up and run the whole test suite (pytest's own exit status; "no tests" is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
# Tests that use real programs: the report's test opens it in a headless browser (Debian's
# chromium + chromedriver); the etcd rehearsal runs a live 3-member cluster (etcd-server,
# etcd-client).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "test.sh: installing ${missing[*]} (for the browser and live etcd tests)" >&2
    if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
bash scripts/setup.sh
# The package's layers and the absence of import cycles (pyproject.toml, [tool.importlinter]).
.venv/bin/lint-imports
# Two pytest processes (pytest-xdist), each with its own Spark session: most of a test's
# time is one driver thread planning queries, so two of them keep both cores busy. A test
# file runs whole in one process (its module fixtures are built once); files are handed out
# in collection order, longest first (tests/conftest.py, SLOW_FIRST; its pytest_configure
# keeps xdist from re-ordering them).
# AUDITOR_TEST_WORKERS=0 runs everything in this process.
set +e
.venv/bin/python -m pytest -n "${AUDITOR_TEST_WORKERS:-2}" --dist loadfile "$@"
status=$?
set -e
if [ "$status" = "5" ]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
