#!/usr/bin/env bash
# Collect what the auditor needs from one Kafka broker, in the SPEC 3.1 snapshot layout:
#
#   OUT/broker=<id>/<logdir>/replication-offset-checkpoint     (copied FIRST)
#   OUT/broker=<id>/<logdir>/<topic>-<partition>/<segment>.log.txt   (kafka-dump-log.sh output)
#   OUT/broker=<id>/<logdir>/<topic>-<partition>/leader-epoch-checkpoint  (copied LAST)
#   OUT/broker=<id>/<logdir>/log-start-offset-checkpoint, recovery-point-offset-checkpoint
#   OUT/topics-describe.txt   (with --bootstrap-server)
#
# KRaft (SPEC 4.7): the metadata log folder (__cluster_metadata-0, @metadata-0 on 2.8) is
# collected on controllers and brokers alike: the names of its snapshots (empty files named
# <end offset>-<epoch>.checkpoint: the name is the id) before the dumps, its segments and
# snapshots dumped with --cluster-metadata-decoder (<file>.txt), leader-epoch-checkpoint and
# quorum-state last. With --bootstrap-server (or --bootstrap-controller) the script first
# writes OUT/metadata-quorum-status.txt (kafka-metadata-quorum.sh describe --status): its
# HighWatermark is the only high watermark of the metadata log anyone can capture. The
# decoder prints metadata records (configs, credentials' metadata): the auditor drops them
# at parse time, but treat the collected folder as sensitive, or pass --no-metadata-decoder
# (control records still print with --deep-iteration, which is what the checks read).
#
# With --per-broker-file the dumps of each log dir go into ONE multi-section file,
# OUT/broker=<id>/<logdir>/kafka-dump-log.txt (one kafka-dump-log.sh run per partition,
# over all its segments), instead of one file per segment: use it from about 10,000
# partitions, where millions of small files cost more to list and open than to parse.
#
# The order makes a running broker yield a consistent snapshot: HWMs read before the logs
# can only be lower than what the dumps hold, and epoch checkpoints read after the logs
# cover every epoch the dumps show. Payloads are never dumped (no --print-data-log).
#
# usage: collect-broker-snapshot.sh --broker-id N --log-dirs DIR[,DIR...] --out OUT
#            [--kafka-bin DIR] [--deep-iteration] [--bootstrap-server HOST:PORT]
#            [--per-broker-file] [--bootstrap-controller HOST:PORT] [--no-metadata-decoder]
set -euo pipefail

usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

BROKER="" LOG_DIRS="" OUT="" KAFKA_BIN="${KAFKA_BIN:-}" DEEP="" BOOTSTRAP="" PER_BROKER="" CONTROLLER=""
META_DECODER="--cluster-metadata-decoder"
while [ $# -gt 0 ]; do
    case "$1" in
        --broker-id) BROKER="$2"; shift 2 ;;
        --log-dirs) LOG_DIRS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --kafka-bin) KAFKA_BIN="$2"; shift 2 ;;
        --deep-iteration) DEEP="--deep-iteration"; shift ;;
        --bootstrap-server) BOOTSTRAP="$2"; shift 2 ;;
        --per-broker-file) PER_BROKER=1; shift ;;
        --bootstrap-controller) CONTROLLER="$2"; shift 2 ;;
        --no-metadata-decoder) META_DECODER="--deep-iteration"; shift ;;
        -h|--help) usage ;;
        *) echo "collect: unknown argument $1" >&2; usage ;;
    esac
done
[ -n "$BROKER" ] && [ -n "$LOG_DIRS" ] && [ -n "$OUT" ] || usage
case "$BROKER" in ''|*[!0-9]*) echo "collect: --broker-id must be an integer" >&2; exit 2 ;; esac

# kafka-dump-log.sh exists from Kafka 2.0; older releases run the class directly.
if [ -n "$KAFKA_BIN" ] && [ -x "$KAFKA_BIN/kafka-dump-log.sh" ]; then
    DUMP=("$KAFKA_BIN/kafka-dump-log.sh")
elif [ -n "$KAFKA_BIN" ] && [ -x "$KAFKA_BIN/kafka-run-class.sh" ]; then
    DUMP=("$KAFKA_BIN/kafka-run-class.sh" kafka.tools.DumpLogSegments)
elif command -v kafka-dump-log.sh >/dev/null 2>&1; then
    DUMP=(kafka-dump-log.sh)
else
    echo "collect: kafka-dump-log.sh not found (use --kafka-bin)" >&2; exit 2
fi

DEST="$OUT/broker=$BROKER"
mkdir -p "$DEST"
IFS=',' read -r -a DIRS <<< "$LOG_DIRS"

copy_if_present() { if [ -f "$1" ]; then cp "$1" "$2"; fi; }

# 0. KRaft: the quorum's status (its HighWatermark) before anything else
if [ -n "$BOOTSTRAP" ] || [ -n "$CONTROLLER" ]; then
    QUORUM="${KAFKA_BIN:+$KAFKA_BIN/}kafka-metadata-quorum.sh"
    if [ -n "$CONTROLLER" ]; then target=(--bootstrap-controller "$CONTROLLER"); else target=(--bootstrap-server "$BOOTSTRAP"); fi
    if command -v "$QUORUM" >/dev/null 2>&1 || [ -x "$QUORUM" ]; then
        "$QUORUM" "${target[@]}" describe --status > "$OUT/metadata-quorum-status.txt" 2>/dev/null || {
            rm -f "$OUT/metadata-quorum-status.txt"
            echo "collect: kafka-metadata-quorum.sh describe --status failed (a ZooKeeper cluster?): skipped" >&2; }
    fi
fi

# KRaft's metadata log folder: snapshot names first, then the dumps with the decoder
collect_metadata() {
    local part="$1" dest="$2" f
    for f in "$part"/*.checkpoint; do
        [ -f "$f" ] || continue
        : > "$dest/$(basename "$f")"
    done
    for f in "$part"/*.log "$part"/*.checkpoint; do
        [ -f "$f" ] || continue
        "${DUMP[@]}" --files "$f" $META_DECODER > "$dest/$(basename "$f").txt" \
            2> "$dest/$(basename "$f").stderr" || echo "collect: kafka-dump-log.sh failed on $f (kept its output)" >&2
    done
}

i=0
for dir in "${DIRS[@]}"; do
    [ -d "$dir" ] || { echo "collect: log dir $dir does not exist" >&2; exit 2; }
    name="logdir$i-$(basename "$dir")"; i=$((i + 1))
    mkdir -p "$DEST/$name"
    # 1. high watermarks first
    copy_if_present "$dir/replication-offset-checkpoint" "$DEST/$name/"
    copy_if_present "$dir/log-start-offset-checkpoint" "$DEST/$name/"
    copy_if_present "$dir/recovery-point-offset-checkpoint" "$DEST/$name/"
    # 2. the segments
    parts=0 segs=0
    for part in "$dir"/*-[0-9]*/; do
        part="${part%/}"; pname="$(basename "$part")"
        case "$pname" in *-delete|*-future|*-stray) continue ;; esac
        [[ "$pname" =~ ^.+-[0-9]+$ ]] || continue
        mkdir -p "$DEST/$name/$pname"
        if [ "$pname" = "__cluster_metadata-0" ] || [ "$pname" = "@metadata-0" ]; then
            collect_metadata "$part" "$DEST/$name/$pname"
        elif [ -n "$PER_BROKER" ]; then
            # one run over every segment of the partition, appended to the log dir's file;
            # each section's "Dumping <dir>/<topic>-<partition>/<segment>.log" header names
            # its partition (SPEC 3.1: a per-broker file takes the partition from the header)
            list=""
            for seg in "$part"/*.log; do
                [ -f "$seg" ] || continue
                list="${list:+$list,}$seg"; segs=$((segs + 1))
            done
            if [ -n "$list" ]; then
                "${DUMP[@]}" --files "$list" $DEEP >> "$DEST/$name/kafka-dump-log.txt" \
                    2>> "$DEST/$name/kafka-dump-log.stderr" || \
                    echo "collect: kafka-dump-log.sh failed on $part (kept its output)" >&2
            fi
        else
            for seg in "$part"/*.log; do
                [ -f "$seg" ] || continue
                "${DUMP[@]}" --files "$seg" $DEEP > "$DEST/$name/$pname/$(basename "$seg").txt" \
                    2> "$DEST/$name/$pname/$(basename "$seg").stderr" || \
                    echo "collect: kafka-dump-log.sh failed on $seg (kept its output)" >&2
                segs=$((segs + 1))
            done
        fi
        parts=$((parts + 1))
        if [ $((parts % 100)) -eq 0 ]; then echo "collect: $dir: $parts partitions, $segs segments dumped" >&2; fi
    done
    echo "collect: $dir: $parts partitions, $segs segments dumped" >&2
    # 3. epoch checkpoints last
    for part in "$dir"/*-[0-9]*/; do
        part="${part%/}"; pname="$(basename "$part")"
        [ -d "$DEST/$name/$pname" ] || continue
        copy_if_present "$part/leader-epoch-checkpoint" "$DEST/$name/$pname/"
        # KRaft: written before a node acts in a new epoch, so copied after the log
        copy_if_present "$part/quorum-state" "$DEST/$name/$pname/"
    done
done

if [ -n "$BOOTSTRAP" ]; then
    TOPICS="${KAFKA_BIN:+$KAFKA_BIN/}kafka-topics.sh"
    "$TOPICS" --bootstrap-server "$BOOTSTRAP" --describe > "$OUT/topics-describe.txt"
fi
echo "collect: broker $BROKER written to $DEST" >&2
