"""The line grammar of ``kafka-dump-log.sh`` / DumpLogSegments output, Kafka 0.8 to 4.x.

Pure ``Column`` builders: classify a line (prefix tests, then built-in regular expressions)
and read its metadata fields by token. Payloads never leave this module: :func:`metadata_part` cuts every
line at the first key/payload/control field before any field is read, and
:func:`redacted` is what ``parse_errors.line`` stores.

Line kinds (era letters as in KAFKA-FORMATS.md 1.4):

``header``          ``Dumping <path>``
``segment_start``   ``Starting offset: N`` (0.8-3.2) / ``Log starting offset: N`` (3.3+)
``batch_v2``        ``baseOffset: ...`` batch line (eras D shallow, E-J)
``batch_legacy``    ``offset: N position: P ... size: ...`` magic 0/1 batch line (D shallow, E-J)
``message_legacy``  ``offset: N position: P ... payloadsize: ...`` message line (eras A-C)
``record_deep``     ``offset: N position: P ... keysize: ...`` record line (era D deep, 0.11-2.1)
``record``          ``| offset: N ...`` record line (2.2+)
``record_content``  ``| key: ...`` / ``payload: ...`` contents without metadata (2.8+)
``invalid_bytes``   ``Found N invalid bytes at the end of F``
``index_like``      ``offset: N position: P`` / ``timestamp: T offset: N`` / producer and
                    transaction index lines: valid only inside index sections
``notice``          tool notices, stderr summaries, KRaft snapshot headers, elisions
``blank``           empty line
``unknown``         anything else (a parse error inside a ``.log`` section)
"""

from __future__ import annotations

import re
from functools import reduce

from pyspark.sql import Column

from auditor import columns as F
from auditor.columns import lit

INT = r"-?\d+"

#: Where a line's content (keys, payloads, header keys, control records) starts.
_CONTENT_WORDS = ("key:", "payload:", "headerKeys:", "endTxnMarker:", "controlType:", "LeaderChange:",
                  "SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters")

#: Substrings of those words, each starting with a byte that batch lines rarely hold: a
#: line holding none of them holds none of the words (tested). Spark's ``contains`` compares
#: the whole needle only where its first byte matches, so searching these is a scan per
#: word where searching the words themselves (``endTxnMarker:`` at every ``e``) cost a
#: fifth of the scan's time.
_CONTENT_GUARDS = ("y:", "yload:", "K", "xnMarker:", "Type:", "Change:", "Header", "Footer")

_CONTENT_CUT = r"(?:^|\s)(?:" + "|".join(
    re.escape(w) if w.endswith(":") else rf"{re.escape(w)}\b" for w in _CONTENT_WORDS) + r").*$"

_NOTICES = "|".join([
    r"^.* is deprecated\. Please use .*$",
    r"^.* is empty\.$",
    r"^.* passed sanity check\.$",
    r"^Ignoring unknown file .*$",
    r"^Mismatches in :.*$",
    r"^Index offset: .*$",
    r"^Non-consecutive offsets in .*$",
    r"^-?\d+ is followed by -?\d+$",
    r"^Found timestamp mismatch in :.*$",
    r"^Index timestamp: .*$",
    r"^Found out of order timestamp in :.*$",
    r"^The following indexed offsets are not found in the log\.$",
    r"^Indexed offset: .*$",
    r"^Snapshot end offset: .*$",
    r"^KRaft bootstrap snapshot$",
    r"^\.\.\.+$",
    r"^#.*$",
])

BATCH_KINDS = ("batch_v2", "batch_legacy")
REBUILT_KINDS = ("message_legacy", "record_deep")
RECORD_KINDS = ("record", "record_content")


def stripped(text: Column) -> Column:
    """The line without surrounding whitespace (pastes are often indented; CR of CRLF)."""
    ragged = text.endswith("\r") | text.endswith("\t")
    return F.trim(F.when(ragged, F.regexp_replace(text, r"[\r\t]+$", "")).otherwise(text))


def metadata_part(line: Column) -> Column:
    """The line cut before its first key, payload, header-keys or control-record field.

    Most lines hold none of those words: a few plain substring searches
    (:data:`_CONTENT_GUARDS`) spare them the regular expression.
    """
    maybe = reduce(lambda a, b: a | b, [line.contains(w) for w in _CONTENT_GUARDS])
    return F.when(maybe, F.regexp_replace(line, _CONTENT_CUT, "")).otherwise(line)


def header_conflict(h_topic: Column, h_partition: Column, topic: Column, partition: Column) -> Column:
    """A section's header names another partition than its file's folder (SPEC 3.1)."""
    return h_topic.isNotNull() & topic.isNotNull() & ((h_topic != topic) | (h_partition != partition))


def line_kind(line: Column) -> Column:
    """Classify a stripped line (see the module docstring for the kinds).

    The common kinds (v2 batch lines, record lines) are tested first with plain prefix
    checks, so most lines never reach a regular expression.
    """
    offset_line = line.rlike(rf"^offset: {INT} position: {INT}")
    return (
        F.when(line.startswith("baseOffset: "), "batch_v2")
        .when(line.rlike(r"^\|\s*offset: "), "record")
        .when(line == "", "blank")
        .when(line.rlike(r"^Dumping \S"), "header")
        .when(line.rlike(rf"^(Log s|S)tarting offset: {INT}$"), "segment_start")
        .when(line.rlike(r"^Found \d+ invalid bytes at the end of "), "invalid_bytes")
        .when(line.rlike(r"^\|?\s*(key|payload): "), "record_content")
        .when(offset_line & line.rlike(r"\spayloadsize: "), "message_legacy")
        .when(offset_line & line.rlike(r"\skeysize: "), "record_deep")
        .when(offset_line & line.rlike(r"\ssize: "), "batch_legacy")
        .when(offset_line & line.rlike(rf"^offset: {INT} position: {INT}$"), "index_like")
        .when(line.rlike(rf"^timestamp: {INT} offset: {INT}$"), "index_like")
        .when(line.rlike(r"^(producerId: |version: \d+ producerId: )"), "index_like")
        .when(line.rlike(_NOTICES), "notice")
        .otherwise("unknown")
    )


def tokens(meta: Column) -> Column:
    """The metadata part split at single spaces, after a leading empty token.

    Compute it once per line (as its own column). A field is then one array scan for its
    ``name:`` token and one index: no regular expression, no string copy per field. The
    leading empty token makes an absent field read as empty (``array_position`` gives 0).
    """
    return F.split(F.concat(lit(" "), meta), " ")


def field_text(toks: Column, name: str) -> Column:
    """The token after the first ``name:`` token of ``toks`` (:func:`tokens`); null when the
    field is absent or empty (two spaces, or a line cut after the name)."""
    value = F.get(toks, F.array_position(toks, f"{name}:").cast("int"))
    return F.nullif(value, lit(""))


def field_long(fields: Column, name: str) -> Column:
    """A numeric field as BIGINT (null when absent or not a number)."""
    return field_text(fields, name).try_cast("bigint")


def field_int(fields: Column, name: str) -> Column:
    """A numeric field as INT (null when absent or not a number)."""
    return field_text(fields, name).try_cast("int")


def field_bool(fields: Column, *names: str) -> Column:
    """A ``true``/``false`` field, trying each spelling in ``names`` (e.g. isvalid/isValid);
    null when absent or neither ``true`` nor ``false``."""
    values = [field_text(fields, n) for n in names]
    value = F.coalesce(*[F.when(v.isin("true", "false"), v) for v in values])
    return value == lit("true")


def header_path(line: Column) -> Column:
    """The path of a ``Dumping <path>`` line."""
    return F.regexp_extract(line, r"^Dumping (.+)$", 1)


def section_kind(path: Column) -> Column:
    """What a ``Dumping`` section holds, from the suffix of its path (KAFKA-FORMATS 1.2)."""
    return (
        F.when(path.rlike(r"\.log$"), "log")
        .when(path.rlike(r"\.(index|timeindex|snapshot|txnindex)$"), "index")
        .when(path.rlike(r"\.checkpoint$"), "kraft-snapshot")
        .otherwise("other")
    )


def header_topic_partition(path: Column) -> tuple[Column, Column]:
    """``(topic, partition)`` from the parent folder of a header path, nulls when absent."""
    pattern = r"(?:^|[/\\])([^/\\]+)-(\d+)[/\\][^/\\]+$"
    topic = F.regexp_extract(path, pattern, 1)
    part = F.regexp_extract(path, pattern, 2)
    return F.when(topic != "", topic), F.when(part != "", part.try_cast("int"))


def header_base_offset(path: Column) -> Column:
    """Segment base offset from the file name of a header path (``000...123.log`` -> 123)."""
    value = F.regexp_extract(path, r"(?:^|[/\\])(\d+)\.[^/\\]*$", 1)
    return F.when(value != "", value.try_cast("bigint"))


#: Metadata field names of kafka-dump-log.sh lines (KAFKA-FORMATS.md), the only words a
#: stored line keeps.
_FIELD_NAMES = (
    "offset", "position", "CreateTime", "LogAppendTime", "NoTimestampType", "timestamp", "magic", "crc",
    "isvalid", "isValid", "valid", "compresscodec", "compressType", "producerEpoch", "producerId", "size",
    "isTransactional", "sequence", "baseSequence", "lastSequence", "firstSequence", "baseOffset", "lastOffset",
    "firstOffset", "partitionLeaderEpoch", "isControl", "count", "keySize", "keysize", "valueSize", "valuesize",
    "payloadsize", "deleteHorizonMs", "batchSize", "offsetDelta", "lastStableOffset", "lastTimestamp",
    "currentTxnFirstOffset", "coordinatorEpoch", "epoch", "version",
)
#: The values those fields take: numbers (``crc: N}`` in 3.x legacy records), booleans,
#: codec names, ``deleteHorizonMs``'s optional.
_FIELD_VALUE = (r"^(-?\d+\}?|true|false|none|NONE|gzip|GZIP|snappy|SNAPPY|lz4|LZ4|zstd|ZSTD|\w*CompressionCodec"
                r"|OptionalLong\.empty|OptionalLong\[-?\d+\])$")
NOT_SHOWN = "<not shown>"


def safe_metadata(meta: Column) -> Column:
    """``meta`` with every word that is not a known field name, or a value of the usual shape
    right after one, replaced by ``<not shown>``: a damaged line may carry payload text where
    no content word announces it (a cut line run into a payload continuation)."""
    toks = F.split(meta, " ")
    names = [f"{n}:" for n in _FIELD_NAMES]

    def keep(token: Column, i: Column) -> Column:
        is_value = F.get(toks, i - 1).isin(*names) & token.rlike(_FIELD_VALUE)
        return F.when(token.isin(*names, "|", "") | is_value, token).otherwise(lit(NOT_SHOWN))

    joined = F.array_join(F.transform(toks, keep), " ")
    return F.regexp_replace(joined, f"{NOT_SHOWN}( {NOT_SHOWN})+", NOT_SHOWN)


def redacted(line: Column, kind: Column) -> Column:
    """What ``parse_errors.line`` may store: metadata only, never payloads.

    A line the grammar recognises is cut before its content fields, and of the rest only
    known field names and their values are kept (:func:`safe_metadata`). A line it does not
    recognise may be a payload continued over several physical lines, so only its length
    is kept.
    """
    meta = F.substring(safe_metadata(metadata_part(line)), 1, 500)
    return (
        F.when(kind == "unknown", F.concat(
            lit("<unrecognised line of "), F.length(line).cast("string"), lit(" characters, not shown>")))
        .when(kind == "invalid_bytes", F.concat(
            lit("Found "), F.regexp_extract(line, r"^Found (\d+) ", 1), lit(" invalid bytes at the end of the segment")))
        .otherwise(meta)
    )
