#!/usr/bin/env bash
# Set up and run the whole test suite (pytest's own exit status; "no tests" is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
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
