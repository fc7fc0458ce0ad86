#!/usr/bin/env bash
# A live rehearsal for `auditor audit ROOT --format etcd` (README "Auditing etcd").
#
# Starts a 3-member etcd cluster on loopback ports (Debian's etcd-server: installed when
# missing and we are root), writes keys with etcdctl, SIGKILLs and restarts a follower and
# then the leader while writes go on, waits until the members agree, records
# `etcdctl endpoint status` and copies each member's data dir to ROOT/member=N/ (N = 1, 2,
# 3), then stops the cluster. Every value written carries a marker token, so a test can
# grep the auditor's output for it (no key or value may be stored).
#
# usage: scripts/etcd-rehearsal.sh ROOT
# env:   ETCD_REHEARSAL_PORT  first of the loopback ports used (default 23380; it uses
#                             PORT+11 .. PORT+32, below Linux's ephemeral range)
#        ETCD_REHEARSAL_KEYS  keys written in all (default 150)
#        ETCD_REHEARSAL_TOKEN the marker token put in every value (default: random)
# Writes ROOT/member=N/member/{wal,snap}/..., ROOT/endpoint-status.json (etcdctl's JSON
# taken just before the copy) and ROOT/members.tsv (N, name, member id in hex, client URL).
set -euo pipefail

ROOT=${1:?usage: scripts/etcd-rehearsal.sh ROOT}
PORT=${ETCD_REHEARSAL_PORT:-23380}
KEYS=${ETCD_REHEARSAL_KEYS:-150}
TOKEN=${ETCD_REHEARSAL_TOKEN:-REHEARSAL-$RANDOM$RANDOM}

if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
    if [ "$(id -u)" != "0" ]; then
        echo "etcd-rehearsal: etcd and etcdctl are needed: apt-get install etcd-server etcd-client" >&2
        exit 2
    fi
    echo "etcd-rehearsal: installing Debian's etcd-server and etcd-client" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server etcd-client >/dev/null
fi
if [ -e "$ROOT" ] && [ -n "$(ls -A "$ROOT" 2>/dev/null)" ]; then
    echo "etcd-rehearsal: $ROOT exists and is not empty" >&2
    exit 2
fi
mkdir -p "$ROOT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcd-rehearsal.XXXXXX")
export ETCDCTL_API=3

client() { echo "http://127.0.0.1:$((PORT + 10 * $1 + 1))"; }
peer() { echo "http://127.0.0.1:$((PORT + 10 * $1 + 2))"; }
CLUSTER="m1=$(peer 1),m2=$(peer 2),m3=$(peer 3)"
ALL="$(client 1),$(client 2),$(client 3)"
declare -A PIDS

log() { echo "etcd-rehearsal: $*" >&2; }

start() {  # start member $1 (a fresh data dir or the one it had)
    etcd --name "m$1" --data-dir "$WORK/m$1" \
        --listen-client-urls "$(client "$1")" --advertise-client-urls "$(client "$1")" \
        --listen-peer-urls "$(peer "$1")" --initial-advertise-peer-urls "$(peer "$1")" \
        --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token rehearsal \
        --snapshot-count 60 --heartbeat-interval 50 --election-timeout 500 \
        >>"$WORK/m$1.log" 2>&1 &
    PIDS[$1]=$!
}

stop_all() {
    for i in 1 2 3; do
        if [ -n "${PIDS[$i]:-}" ]; then kill -TERM "${PIDS[$i]}" 2>/dev/null || true; fi
    done
    for i in 1 2 3; do
        if [ -n "${PIDS[$i]:-}" ]; then wait "${PIDS[$i]}" 2>/dev/null || true; fi
    done
    PIDS=()
}
trap 'stop_all; rm -rf "$WORK"' EXIT

healthy() {  # wait until every member answers and one leader is known
    for _ in $(seq 1 150); do
        if etcdctl --endpoints="$ALL" --command-timeout=1s endpoint health >/dev/null 2>&1 \
            && [ -n "$(leader)" ]; then
            return 0
        fi
        sleep 0.2
    done
    log "the cluster did not become healthy; member logs:"
    tail -n 20 "$WORK"/m*.log >&2
    exit 1
}

status_json() { etcdctl --endpoints="$ALL" --command-timeout=2s endpoint status -w json 2>/dev/null; }

leader() {  # the number (1-3) of the current leader, empty when unknown
    status_json | python3 -c '
import json, sys
try:
    rows = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for r in rows:
    if r["Status"]["header"]["member_id"] == r["Status"]["leader"]:
        print((int(r["Endpoint"].rsplit(":", 1)[1]) - int(sys.argv[1])) // 10)
' "$PORT"
}

put_keys() {  # put keys $1..$2, retrying each while an election is on
    for k in $(seq "$1" "$2"); do
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            if etcdctl --endpoints="$ALL" --command-timeout=2s put "/rehearsal/key-$k" "value-$k-$TOKEN" >/dev/null 2>&1; then
                break
            fi
            sleep 0.2
        done
    done
}

for i in 1 2 3; do
    for url in "$(client "$i")" "$(peer "$i")"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/${url##*:}") 2>/dev/null; then
            log "port ${url##*:} is in use: set ETCD_REHEARSAL_PORT to another base"
            exit 2
        fi
    done
done
log "starting 3 members on 127.0.0.1:$((PORT + 11))-$((PORT + 32)) (work dir $WORK)"
for i in 1 2 3; do start "$i"; done
healthy
third=$((KEYS / 3))
put_keys 1 "$third"

log "writing while a follower is killed (SIGKILL) and restarted"
put_keys "$((third + 1))" "$((2 * third))" &
writer=$!
sleep 0.5
lead=$(leader)
follower=$(( lead % 3 + 1 ))
kill -KILL "${PIDS[$follower]}"; wait "${PIDS[$follower]}" 2>/dev/null || true
sleep 1
start "$follower"
wait "$writer"
healthy

log "writing while the leader (m$(leader)) is killed (SIGKILL) and restarted"
put_keys "$((2 * third + 1))" "$KEYS" &
writer=$!
sleep 0.5
lead=$(leader)
kill -KILL "${PIDS[$lead]}"; wait "${PIDS[$lead]}" 2>/dev/null || true
sleep 1
start "$lead"
wait "$writer"
healthy
put_keys "$((KEYS + 1))" "$((KEYS + 5))"  # a few writes in the newest term

log "waiting until every member has committed the same index"
for _ in $(seq 1 100); do
    if status_json | python3 -c '
import json, sys
rows = json.load(sys.stdin)
sys.exit(0 if len(rows) == 3 and len({(r["Status"]["raftIndex"], r["Status"]["raftTerm"]) for r in rows}) == 1 else 1)
'; then break; fi
    sleep 0.2
done
sleep 0.5  # let the last heartbeats' hard state reach the WAL

status_json >"$ROOT/endpoint-status.json"
log "copying the data dirs to $ROOT/member=N (etcd's preallocated *.tmp WAL files left out)"
: >"$ROOT/members.tsv"
for i in 1 2 3; do
    mkdir -p "$ROOT/member=$i"
    tar -C "$WORK/m$i" --exclude='*.tmp' -cf - member | tar -C "$ROOT/member=$i" -xf -
    id=$(etcdctl --endpoints="$(client "$i")" endpoint status -w json | python3 -c '
import json, sys
print(format(json.load(sys.stdin)[0]["Status"]["header"]["member_id"], "x"))')
    printf '%s\tm%s\t%s\t%s\n' "$i" "$i" "$id" "$(client "$i")" >>"$ROOT/members.tsv"
done
stop_all
python3 - "$ROOT/endpoint-status.json" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    s = r["Status"]
    print(f"{r['Endpoint']}: raft index {s['raftIndex']}, term {s['raftTerm']}, "
          f"leader {'yes' if s['leader'] == s['header']['member_id'] else 'no'}")
EOF
echo "audit it with: auditor audit $ROOT --format etcd --out OUT"
