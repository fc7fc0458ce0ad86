#!/usr/bin/env bash
# Set up and run the whole test suite (pytest's own exit status; "no tests" is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
# The report's test opens it in a real headless browser (Debian's chromium + chromedriver).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "test.sh: installing chromium and chromium-driver (for the report's browser test)" >&2
    if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium chromium-driver
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
