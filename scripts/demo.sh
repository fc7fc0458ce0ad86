#!/usr/bin/env bash
# Demo: set up, simulate a small 3-broker cluster with a few injected incidents (an unclean
# election, a lossy shutdown, a fast fail-over, a stopped follower, a zombie transaction and a
# cleaner bug on the compacted consumer offsets), written as Kafka's own segment files, audit
# it, and write the Delta tables under demo-out/tables.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rm -rf demo-out
.venv/bin/auditor simulate demo-out/snapshot --brokers 3 --topics 2 --partitions 4 --seed 7 --format segments \
    --faults unclean-election,lossy-shutdown,fast-failover,stopped-follower,zombie-transaction,cleaner-bug
# --verify-crc: the demo's segments are small; every batch is read whole and its CRC checked.
# --fail-on never: the demo cluster has findings on purpose; a scheduled run would keep
# the default (critical) so that the exit status can page someone.
.venv/bin/auditor audit demo-out/snapshot --out demo-out/tables --cluster demo \
    --report demo-out/report.html --fail-on never --verify-crc
echo
echo "findings:        demo-out/tables/findings (Delta; one row per finding, see README 'Tables')"
echo "HTML report:     demo-out/report.html (also: .venv/bin/auditor explain demo-out/tables payments-2)"
echo "ground truth:    demo-out/snapshot/expected_findings.json (what the simulator knows happened)"
