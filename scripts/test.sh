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
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" = "5" ]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
