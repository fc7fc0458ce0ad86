#!/usr/bin/env bash
# A real Spark standalone cluster on this machine's loopback: one master and two workers,
# each its own JVM (1 core, 1 GB each), started from the installed pyspark's own jars.
#
#   scripts/local-cluster.sh start [DIR]   start it; prints the master URL (spark://127.0.0.1:PORT)
#   scripts/local-cluster.sh stop [DIR]    stop the workers, then the master (SIGTERM, then SIGKILL)
#   scripts/local-cluster.sh status [DIR]  the master URL when it is up (exit 1 when it is not)
#
# DIR (default: $AUDITOR_CLUSTER_DIR, else /tmp/auditor-local-cluster) holds the daemons'
# logs (master.log, worker-N.log), their pids, the workers' work folders (executors' stdout
# and stderr) and master.url. Ports are chosen by the kernel (port 0), so several clusters
# can run at once. WORKERS, WORKER_CORES and WORKER_MEMORY override 2, 1 and 1g.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
ACTION="${1:-}"
DIR="${2:-${AUDITOR_CLUSTER_DIR:-/tmp/auditor-local-cluster}}"
WORKERS="${WORKERS:-2}"
WORKER_CORES="${WORKER_CORES:-1}"
WORKER_MEMORY="${WORKER_MEMORY:-1g}"

die() { echo "local-cluster.sh: $*" >&2; exit 1; }

spark_home() {
    "$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null \
        || die "no pyspark in $PYTHON (run scripts/setup.sh first, or set PYTHON)"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Wait until FILE holds a line matching PATTERN (or the process of PIDFILE died); print it.
wait_for_line() {
    local file=$1 pattern=$2 pidfile=$3 line=""
    for _ in $(seq 1 240); do
        line=$(grep -m1 -E "$pattern" "$file" 2>/dev/null || true)
        if [ -n "$line" ]; then echo "$line"; return 0; fi
        alive "$pidfile" || { tail -n 20 "$file" >&2; die "the daemon of $pidfile exited (log: $file)"; }
        sleep 0.25
    done
    tail -n 20 "$file" >&2
    die "timed out waiting for /$pattern/ in $file"
}

# Start one daemon in the background in its own process group; record its pid.
daemon() {
    local name=$1; shift
    SPARK_HOME="$SPARK_HOME" SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$DIR" \
        setsid "$SPARK_HOME/bin/spark-class" "$@" >"$DIR/$name.log" 2>&1 < /dev/null &
    echo $! >"$DIR/$name.pid"
}

start() {
    if alive "$DIR/master.pid"; then
        cat "$DIR/master.url"; return 0
    fi
    mkdir -p "$DIR"
    rm -f "$DIR"/*.pid "$DIR/master.url"
    SPARK_HOME="$(spark_home)"
    export SPARK_HOME
    # Daemons take Spark's defaults from here (and nothing from a stray spark-defaults.conf).
    export SPARK_CONF_DIR="$DIR/conf"
    mkdir -p "$SPARK_CONF_DIR"
    : >"$SPARK_CONF_DIR/spark-defaults.conf"
    daemon master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 0 --webui-port 0
    local url
    url=$(wait_for_line "$DIR/master.log" 'Starting Spark master at spark://' "$DIR/master.pid" \
        | grep -oE 'spark://[^ ]+')
    for i in $(seq 1 "$WORKERS"); do
        mkdir -p "$DIR/worker-$i"
        daemon "worker-$i" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --port 0 --webui-port 0 \
            --cores "$WORKER_CORES" --memory "$WORKER_MEMORY" --work-dir "$DIR/worker-$i" "$url"
    done
    for i in $(seq 1 "$WORKERS"); do
        wait_for_line "$DIR/worker-$i.log" 'Successfully registered with master' "$DIR/worker-$i.pid" >/dev/null
    done
    echo "$url" >"$DIR/master.url"
    echo "$url"
}

stop_one() {
    local pidfile=$1
    [ -f "$pidfile" ] || return 0
    local pid
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        # The daemon leads its own process group (setsid): signal the group, so the JVM
        # that spark-class execs and any executor JVM it started go too.
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

stop() {
    for pidfile in "$DIR"/worker-*.pid; do
        [ -e "$pidfile" ] && stop_one "$pidfile"
    done
    stop_one "$DIR/master.pid"
    rm -f "$DIR/master.url"
}

status() {
    if alive "$DIR/master.pid" && [ -f "$DIR/master.url" ]; then
        cat "$DIR/master.url"
    else
        echo "local-cluster.sh: no cluster running in $DIR" >&2
        return 1
    fi
}

case "$ACTION" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 start|stop|status [DIR]" ;;
esac
