#!/usr/bin/env bash
# Demo: set up, generate a small 3-broker cluster snapshot (with a lagging follower and an
# unclean election in it), audit it, and write the Delta tables under demo-out/tables.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rm -rf demo-out
.venv/bin/python -m auditor.demo demo-out/snapshot
# --fail-on never: the demo cluster has findings on purpose; a scheduled run would keep
# the default (critical) so that the exit status can page someone.
.venv/bin/auditor audit demo-out/snapshot --out demo-out/tables --cluster demo \
    --report demo-out/report.html --fail-on never
