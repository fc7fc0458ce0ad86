"""``auditor collect``: one node's part of a snapshot, read from its log dirs (SPEC 3.4).

This module is the collector whole, and the walk of Kafka's segment files (SPEC 3.3) that
the audit's decoding tasks run too (:mod:`auditor.ingest.segments`). It needs Python 3.9+
and its standard library only, so it runs on a broker as ``python3 -m auditor.collect`` or
as this one file copied there (``python3 -S collect.py ...``); ``pyarrow`` (Parquet tables)
and ``crc32c`` (CRC-32C in C) are used when they can be imported.

What it reads, in the order that gives a consistent view of a running node: Kafka's own
tools for ``--bootstrap-*`` first, then each log dir's ``replication-offset-checkpoint``,
then every segment (a v2 data batch's 61-byte header only, unless ``--verify-crc``), then
``leader-epoch-checkpoint``, ``quorum-state`` and the log dirs' other checkpoint files. It
never writes, renames, locks or deletes anything under a log dir.

What it writes, ``OUT/broker=N/``: ``collect.json`` (the manifest) and per log dir
``logdir=<k>/`` a batch table (one row per batch and quarantined header), a segment table
(one row per segment or snapshot file: the walk's accounting and the file's identity), the
packed small files (their exact bytes and names) and the log dir's checkpoint files as they
are. Tables are Parquet when ``pyarrow`` imports, else gzip CSV with a header row. No payload
byte is written anywhere: rows hold offsets, epochs, sizes, CRCs, counts and flags.
"""

from __future__ import annotations

import argparse
import base64
import csv
import gzip
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

#: The collected layout's version (``collect.json`` ``format_version``): an audit refuses a
#: node folder of a version it does not know (SPEC 3.4).
FORMAT = "auditor-collect"
FORMAT_VERSION = 1
MANIFEST = "collect.json"

# --- Kafka's segment format (KAFKA-FORMATS 5) --------------------------------------------

#: A v2 batch's header (KAFKA-FORMATS 5.2): baseOffset, batchLength, partitionLeaderEpoch,
#: magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
#: producerEpoch, baseSequence, recordsCount.
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_BYTES = V2_HEADER.size  # 61
#: A legacy entry's first bytes: offset, size, crc, magic, attributes.
LEGACY_HEADER = struct.Struct(">qiIbb")
LEGACY_HEADER_BYTES = LEGACY_HEADER.size  # 18
_LENGTH = struct.Struct(">i")
#: Where the walk looks for the next batch: offset int64, length int32, then the magic at
#: byte 16 (Kafka's ``FileLogInputStream`` needs more than this many bytes).
LOG_OVERHEAD = 17
#: The smallest length field of any entry (``RECORD_OVERHEAD_V0``), and per magic.
MIN_LENGTH = 14
MIN_LENGTH_OF = {0: 14, 1: 22, 2: 49}
MAX_OFFSET = (1 << 63) - 1
#: Control record types (KAFKA-FORMATS 5.2, ``ControlRecordType``).
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
#: How a walk ends (the file row's ``stop``).
END, SHORT, BAD_LENGTH, BAD_MAGIC, BELOW_MINIMUM, PAST_END, SHRUNK = (
    "end", "at most 17 bytes remain", "length below 14", "magic not 0, 1 or 2", "length below its magic's minimum",
    "batch runs past the end of the file", "file shrank while read")

#: The fields of a batch (``B``) or quarantined header (``Q``) row, in the order
#: :func:`walk_entries` gives them.
ENTRY_FIELDS = ("row_kind", "position", "size", "magic", "base_offset", "last_offset", "epoch", "crc",
                "record_count", "codec", "is_transactional", "is_control", "producer_id", "producer_epoch",
                "base_sequence", "control_type", "leader_id", "is_valid", "error", "last_control_type")
#: The fields of a file's (``F``) row: its size when opened and where its bytes went.
FILE_FIELDS = ("file_bytes", "batch_bytes", "quarantined_bytes", "tail_position", "tail_bytes", "tail_zero",
               "vanished_bytes", "bytes_read", "stop", "crc_verified", "crc_unverified", "unreadable")

PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
SEGMENT_NAME = re.compile(r"^(?P<base>\d{20})\.log$")
KRAFT_SNAPSHOT_NAME = re.compile(r"^(?P<end>\d{20})-(?P<epoch>\d{10})\.checkpoint$")
KRAFT_TOPICS = ("__cluster_metadata", "@metadata")
SKIPPED_DIR_SUFFIXES = ("-delete", "-future", "-stray")
LEADER_EPOCH, QUORUM_STATE = "leader-epoch-checkpoint", "quorum-state"
HWM = "replication-offset-checkpoint"
#: A partition folder's files that are not read (skipped and counted as known).
NON_INPUT_NAMES = ("partition.metadata", ".lock", ".kafka_cleanshutdown")
NON_INPUT_SUFFIXES = (".index", ".timeindex", ".snapshot", ".txnindex", ".deleted", ".cleaned", ".swap", ".tmp",
                      ".part", ".checkpoint", ".log")
#: The log dir's other checkpoint files, read last and copied as they are.
LATE_LOG_DIR_FILES = ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "cleaner-offset-checkpoint")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (a record's) at ``pos``: its value and the position after it.

    Raises:
        ValueError: the bytes end inside it, or it is longer than 10 bytes.
    """
    shift = raw = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("varint")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def control_record(records: bytes, count: int = 1) -> tuple[str | None, str | None, int | None]:
    """The control types of an uncompressed control batch's first and last records and, for
    a LeaderChange first record, its leader id (``records``: the bytes after the 61-byte
    header; ``count``: its recordsCount). ``(None, None, None)`` when the first record's key
    does not parse (an unknown type, as a dump without record lines); the last type is
    None when a later record does not parse."""
    first = last = leader = None
    pos = 0
    try:
        for i in range(max(1, min(count, 1 << 16))):
            length, pos = _varint(records, pos)
            end = pos + length
            pos += 1  # attributes
            _, pos = _varint(records, pos)  # timestampDelta
            _, pos = _varint(records, pos)  # offsetDelta
            key_length, pos = _varint(records, pos)
            if key_length < 4 or pos + key_length > len(records) or end > len(records):
                raise ValueError("key")
            _, type_id = struct.unpack_from(">hh", records, pos)
            pos += key_length
            name = CONTROL_TYPES.get(type_id, "UNKNOWN(%d)" % type_id)
            if i == 0:
                first = name
                if type_id == 2:
                    value_length, at = _varint(records, pos)
                    if value_length >= 6 and at + value_length <= len(records):
                        leader = struct.unpack_from(">hi", records, at)[1]  # LeaderChangeMessage: version, LeaderId
            last = name
            pos = end
    except (ValueError, struct.error):
        if first is None:
            return None, None, None
        last = None
    return first, last, leader


def _quarantine(base: int, last: int, epoch: int, delta: int, count: int) -> str | None:
    """Why a header holds a value Kafka never writes (SPEC 3.3, 8), or None."""
    if base < 0:
        return "baseOffset %d is negative" % base
    if delta < 0:
        return "lastOffsetDelta %d is negative" % delta
    if last > MAX_OFFSET:
        return "last offset %d is above 2^63 - 1" % last
    if epoch < -1:
        return "partitionLeaderEpoch %d is below -1" % epoch
    if count < 0:
        return "recordsCount %d is negative" % count
    return None


# --- CRC-32C ----------------------------------------------------------------------------

def crc32c_table() -> tuple[int, ...]:
    """CRC-32C's byte table (the reflected Castagnoli polynomial, 0x82F63B78)."""
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


def _python_crc32c() -> Callable[[Any], int]:
    table = crc32c_table()

    def crc32c(data: Any) -> int:
        crc = 0xFFFFFFFF
        for b in bytes(data):
            crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF
    return crc32c


def crc32c_implementation(allow_native: bool = True) -> tuple[Callable[[Any], int], str]:
    """CRC-32C (Castagnoli) and the name of what computes it: the ``crc32c`` package when it
    imports (C), else a pure-Python table (about a thousand times slower)."""
    if allow_native:
        try:
            import crc32c as native  # type: ignore[import-not-found]

            return native.crc32c, "crc32c"
        except ImportError:
            pass
    return _python_crc32c(), "python"


# --- The walk (SPEC 3.3) -----------------------------------------------------------------

def walk_entries(read: Callable[[int, int], bytes], size: int, out: list, *, newest: bool, segment_base: int,
                 verify_crc: bool = False, crc32c: Callable[[Any], int] | None = None) -> dict[str, Any]:
    """Walk one segment file of ``size`` bytes (its size when opened), reading with
    ``read(position, n)`` (fewer bytes back: the file shrank). Appends each ``B`` and ``Q``
    row to ``out`` as a tuple of :data:`ENTRY_FIELDS` and returns the file's ``F`` row
    (:data:`FILE_FIELDS` and ``row_kind``).

    ``newest``: the replica's newest segment (a zero tail there is preallocated space);
    ``segment_base``: its base offset (a legacy wrapper's base when it comes first);
    ``crc32c``: what computes CRC-32C with ``verify_crc`` (default: the C package).
    """
    if verify_crc and crc32c is None:
        crc32c = crc32c_implementation()[0]
    pos = batch_bytes = quarantined = bytes_read = verified = unverified = 0
    prev_last = segment_base - 1
    stop = END
    unpack_v2, unpack_legacy, unpack_length = V2_HEADER.unpack_from, LEGACY_HEADER.unpack_from, _LENGTH.unpack_from
    append = out.append
    while True:
        remaining = size - pos
        if remaining <= 0:
            break
        if remaining <= LOG_OVERHEAD:
            stop = SHORT
            break
        want = V2_HEADER_BYTES if remaining > V2_HEADER_BYTES else remaining
        head = read(pos, want)
        if len(head) < want:
            stop = SHRUNK
            break
        length = unpack_length(head, 8)[0]
        magic = head[16]
        if length < MIN_LENGTH:
            stop = BAD_LENGTH
            break
        if magic not in MIN_LENGTH_OF:
            stop = BAD_MAGIC
            break
        if length < MIN_LENGTH_OF[magic]:
            stop = BELOW_MINIMUM
            break
        total = length + 12
        if total > remaining:
            stop = PAST_END
            break
        valid = control_type = last_type = leader = None
        if magic == 2:
            (base, _, epoch, _, crc, attributes, delta, _, _, producer_id, producer_epoch, base_sequence,
             count) = unpack_v2(head)
            last = base + delta
            control = attributes & 0x20 != 0
            codec = attributes & 0x07
            needed = V2_HEADER_BYTES
            if control or verify_crc:
                whole = head if total == len(head) else read(pos, total)
                needed = total
                if len(whole) < total:
                    stop = SHRUNK
                    break
                if control and codec == 0:
                    control_type, last_type, leader = control_record(whole[V2_HEADER_BYTES:], count)
                if verify_crc:
                    valid = crc32c(memoryview(whole)[21:]) == crc  # type: ignore[misc]
            problem = _quarantine(base, last, epoch, delta, count)
            entry = (pos, total, 2, base, last, epoch, crc, count, codec, attributes & 0x10 != 0, control,
                     producer_id, producer_epoch, base_sequence, control_type, leader, valid)
        else:
            last, _, crc, _, attributes = unpack_legacy(head)
            codec = attributes & 0x07
            needed = LEGACY_HEADER_BYTES
            base = last if codec == 0 else prev_last + 1
            problem = ("offset %d is negative" % last if last < 0 else
                       "a compressed entry at offset %d follows a batch ending at %d" % (last, prev_last)
                       if base > last else None)
            if verify_crc:
                whole = head if total == len(head) else read(pos, total)
                needed = total
                if len(whole) < total:
                    stop = SHRUNK
                    break
                valid = (zlib.crc32(memoryview(whole)[16:]) & 0xFFFFFFFF) == crc
            entry = (pos, total, magic, base, last, -1, crc, last - base + 1, codec, False, False,
                     None, None, None, None, None, valid)
        bytes_read += needed
        if problem is not None:
            append(("Q",) + entry + (problem, last_type))
            quarantined += total
        else:
            append(("B",) + entry + (None, last_type))
            batch_bytes += total
            prev_last = last
            if verify_crc:
                verified += 1
            else:
                unverified += 1
        pos += total
    tail = size - pos
    zero = None
    if stop == SHRUNK:
        vanished, tail = tail, 0
    else:
        vanished = 0
        if tail and newest:
            # a preallocated tail: fewer than 18 bytes, read to check, or a zero 17-byte header
            check = read(pos, tail if tail <= LOG_OVERHEAD else LOG_OVERHEAD)
            bytes_read += len(check)
            zero = len(check) == min(tail, LOG_OVERHEAD) and not any(check)
    return {"row_kind": "F", "file_bytes": size, "batch_bytes": batch_bytes, "quarantined_bytes": quarantined,
            "tail_position": pos if tail else None, "tail_bytes": tail, "tail_zero": zero if tail else None,
            "vanished_bytes": vanished, "bytes_read": bytes_read, "stop": stop, "crc_verified": verified,
            "crc_unverified": unverified, "unreadable": None}


#: Batches smaller than this on average are read through a window of :data:`WINDOW` bytes
#: (after :data:`WARM_UP` headers read one by one): the operating system reads their pages
#: whole anyway, and one ``pread`` per window costs less than one per batch. Larger batches
#: are read header by header.
SMALL_BATCH = 4096
WINDOW = 1 << 20
WARM_UP = 16


def file_reader(fd: int, size: int, throttle: Callable[[int], None] | None = None) -> Callable[[int, int], bytes]:
    """``read(position, n)`` over the open file ``fd`` (what the walk counts as read,
    ``bytes_read``, is what its rules need either way); ``throttle`` is told the bytes of
    each ``pread``."""
    window = b""
    start = calls = 0
    pread = os.pread

    def read(position: int, n: int) -> bytes:
        nonlocal window, start, calls
        calls += 1
        offset = position - start
        if 0 <= offset and offset + n <= len(window):
            return window[offset:offset + n]
        if calls > WARM_UP and position < calls * SMALL_BATCH and n <= WINDOW:  # small batches: a window
            window, start = pread(fd, min(WINDOW, size - position), position), position
            if throttle is not None:
                throttle(len(window))
            return window[:n]  # (shorter: the file shrank)
        data = pread(fd, n, position)
        if throttle is not None:
            throttle(len(data))
        return data

    return read


def _unreadable(exc: OSError, size: int = 0) -> dict[str, Any]:
    return {"row_kind": "F", "file_bytes": size, "batch_bytes": 0, "quarantined_bytes": 0, "tail_position": None,
            "tail_bytes": 0, "tail_zero": None, "vanished_bytes": size, "bytes_read": 0, "stop": END,
            "crc_verified": 0, "crc_unverified": 0, "unreadable": exc.strerror or str(exc)}


def walk_path(path: str, *, newest: bool, segment_base: int, verify_crc: bool = False,
              crc32c: Callable[[Any], int] | None = None, throttle: Callable[[int], None] | None = None,
              missing_ok: bool = False, digests: bool = False
              ) -> tuple[list, dict[str, Any], os.stat_result | None] | None:
    """:func:`walk_entries` over the file at ``path``, opened once and read with ``pread``:
    ``(entries, F row, its stat when opened)``. A file that cannot be opened or read is no
    entry and an ``F`` row with ``unreadable`` set; with ``missing_ok`` one that no longer
    exists is None (it was deleted since it was listed). ``digests``: the ``F`` row also
    holds ``first_header`` and ``last_header`` (:func:`header_digest` of its first and last
    entries, read again through the same open file)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        if missing_ok and isinstance(exc, FileNotFoundError):
            return None
        return [], _unreadable(exc), None
    try:
        st = os.fstat(fd)  # the size when opened: a growing file is read up to it
        entries: list = []
        try:
            facts = walk_entries(file_reader(fd, st.st_size, throttle), st.st_size, entries, newest=newest,
                                 segment_base=segment_base, verify_crc=verify_crc, crc32c=crc32c)
        except OSError as exc:
            return [], _unreadable(exc, st.st_size), st
        if digests and entries:
            facts["first_header"] = header_digest(path, 0, fd)
            facts["last_header"] = header_digest(path, entries[-1][1], fd)
        return entries, facts, st
    finally:
        os.close(fd)


def header_digest(path: str, position: int, fd: int | None = None) -> str | None:
    """SHA-256 of the batch header at ``position`` of ``path`` (61 bytes of a v2 batch, 18 of
    a legacy entry: never payload), or None when there is none there (``fd``: the file
    already open). ``--previous`` keeps a segment's rows only when its first and last
    headers read the same again."""
    if fd is None:
        try:
            opened = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            return header_digest(path, position, opened)
        finally:
            os.close(opened)
    try:
        head = os.pread(fd, V2_HEADER_BYTES, position)
    except OSError:
        return None
    if len(head) <= LOG_OVERHEAD:
        return None
    n = V2_HEADER_BYTES if head[16] == 2 else LEGACY_HEADER_BYTES
    return hashlib.sha256(head[:n]).hexdigest() if len(head) >= n else None


# --- Tables --------------------------------------------------------------------------------

#: Column name and type (``string``, ``int``, ``bigint``, ``boolean``) of each table.
BATCH_COLUMNS = (
    ("topic", "string"), ("partition", "int"), ("file", "string"), ("row_kind", "string"), ("position", "bigint"),
    ("size", "bigint"), ("magic", "int"), ("base_offset", "bigint"), ("last_offset", "bigint"), ("epoch", "int"),
    ("crc", "bigint"), ("record_count", "bigint"), ("codec", "int"), ("is_transactional", "boolean"),
    ("is_control", "boolean"), ("producer_id", "bigint"), ("producer_epoch", "int"), ("base_sequence", "int"),
    ("control_type", "string"), ("leader_id", "int"), ("is_valid", "boolean"), ("error", "string"),
    ("last_control_type", "string"),
    # the segment's base offset (a segment's row) or the snapshot's id, ``<end>-<epoch>`` (a
    # KRaft snapshot file's row): what the file name says
    ("segment_base_offset", "bigint"), ("snapshot_id", "string"),
)
SEGMENT_COLUMNS = (
    ("topic", "string"), ("partition", "int"), ("file", "string"), ("kind", "string"), ("newest", "boolean"),
    ("file_bytes", "bigint"), ("batch_bytes", "bigint"), ("quarantined_bytes", "bigint"),
    ("tail_position", "bigint"), ("tail_bytes", "bigint"), ("tail_zero", "boolean"), ("vanished_bytes", "bigint"),
    ("bytes_read", "bigint"), ("stop", "string"), ("crc_verified", "bigint"), ("crc_unverified", "bigint"),
    ("unreadable", "string"), ("device", "bigint"), ("inode", "bigint"), ("size", "bigint"),
    ("mtime_ns", "bigint"), ("ctime_ns", "bigint"), ("batches", "bigint"), ("first_header", "string"),
    ("last_position", "bigint"), ("last_header", "string"), ("reused", "boolean"),
)
SMALL_FILE_COLUMNS = (
    ("topic", "string"), ("partition", "int"), ("name", "string"), ("size", "bigint"), ("mtime_ns", "bigint"),
    ("content", "string"),  # base64 of the file's exact bytes
)
#: The tables' file names (without the format's extension).
BATCHES, SEGMENTS, SMALL_FILES = "batches", "segments", "small-files"
PARQUET, CSV_GZ = ".parquet", ".csv.gz"
ROWS_PER_CHUNK = 1 << 17


def _arrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return None
    return pyarrow


class TableWriter:
    """One table file, written in chunks of rows: Parquet with ``pyarrow`` (a row group per
    :data:`ROWS_PER_CHUNK` rows), else gzip CSV with a header row (empty field: null)."""

    def __init__(self, path: str, columns: tuple[tuple[str, str], ...], pa: Any) -> None:
        self.columns, self.pa = columns, pa
        self._buffer: list[list] = [[] for _ in columns]
        self._buffered = 0
        if pa is not None:
            types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "boolean": pa.bool_()}
            self.schema = pa.schema([(name, types[t]) for name, t in columns])
            self._writer = pa.parquet.ParquetWriter(path, self.schema, compression="zstd")
        else:
            self._file = gzip.open(path, "wt", newline="", encoding="utf-8", compresslevel=6)
            self._csv = csv.writer(self._file, lineterminator="\n")
            self._csv.writerow([name for name, _ in columns])

    def write(self, rows: list[tuple]) -> None:
        """Rows (tuples in the table's column order)."""
        if rows:
            self.write_columns([list(c) for c in zip(*rows)])

    def write_columns(self, columns: list[list]) -> None:
        """Rows given as columns (each a list, in the table's column order)."""
        n = len(columns[0]) if columns else 0
        if not n:
            return
        if self.pa is None:
            self._csv.writerows(_csv_row(r) for r in zip(*columns))
            return
        for kept, more in zip(self._buffer, columns):
            kept.extend(more)
        self._buffered += n
        if self._buffered >= ROWS_PER_CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self.pa is None or not self._buffered:
            return
        self._writer.write_batch(self.pa.record_batch(
            [self.pa.array(c, f.type) for c, f in zip(self._buffer, self.schema)], schema=self.schema))
        self._buffer, self._buffered = [[] for _ in self.columns], 0

    def close(self) -> None:
        self._flush()
        if self.pa is not None:
            self._writer.close()
        else:
            self._file.close()


def _csv_row(row: tuple) -> list[str]:
    return ["" if v is None else ("true" if v else "false") if isinstance(v, bool) else str(v) for v in row]


def read_table(path: str, columns: tuple[tuple[str, str], ...]) -> Iterator[dict[str, Any]]:
    """The rows of a table :class:`TableWriter` wrote, as dictionaries (``--previous``).

    Raises:
        ValueError: a Parquet table and no ``pyarrow`` here.
    """
    if path.endswith(PARQUET):
        pa = _arrow()
        if pa is None:
            raise ValueError("%s is Parquet and pyarrow cannot be imported here" % path)
        yield from pa.parquet.read_table(path).to_pylist()
        return
    types = dict(columns)
    parse = {"string": str, "int": int, "bigint": int, "boolean": lambda v: v == "true"}
    with gzip.open(path, "rt", newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        for values in reader:
            # an empty field is null (a packed file's content is never null: empty is empty)
            yield {name: (value if name == "content" else None) if value == "" else parse[types[name]](value)
                   for name, value in zip(header, values)}


def table_path(folder: str, name: str) -> str | None:
    """The table ``name`` in ``folder`` (either format), or None."""
    for ext in (PARQUET, CSV_GZ):
        if os.path.exists(os.path.join(folder, name + ext)):
            return os.path.join(folder, name + ext)
    return None


# --- The collector -------------------------------------------------------------------------

class CollectError(Exception):
    """Bad usage, an unreadable log dir or an OUT inside a log dir (exit 2)."""


class Throttle:
    """Caps the read rate at ``rate`` bytes per second (``--max-read-mb-per-s``)."""

    def __init__(self, rate: float) -> None:
        self.rate, self.bytes, self.start = rate, 0, time.monotonic()

    def __call__(self, n: int) -> None:
        self.bytes += n
        ahead = self.bytes / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class Previous:
    """An earlier collection of the same node and format version (``--previous``): its
    segment rows and batch rows, by log dir path."""

    def __init__(self, root: str, node: int, notice: Callable[[str], None]) -> None:
        self.manifest: dict[str, Any] | None = None
        self.folders: dict[str, str] = {}
        folder = os.path.join(root, "broker=%d" % node)
        if not os.path.exists(os.path.join(folder, MANIFEST)) and os.path.exists(os.path.join(root, MANIFEST)):
            folder = root
        try:
            with open(os.path.join(folder, MANIFEST), encoding="utf-8") as handle:
                manifest = json.load(handle)
        except (OSError, ValueError) as exc:
            notice("--previous %s: no collection of node %d there (%s): ignored" % (root, node, exc))
            return
        if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
            notice("--previous %s: format version %r, not %d: ignored" % (
                root, manifest.get("format_version"), FORMAT_VERSION))
            return
        if manifest.get("node_id") != node:
            notice("--previous %s: a collection of node %r, not %d: ignored" % (root, manifest.get("node_id"), node))
            return
        self.manifest = manifest
        for entry in manifest.get("log_dirs", []):
            self.folders[entry["path"]] = os.path.join(folder, entry["label"])

    def segments(self, log_dir: str, notice: Callable[[str], None]) -> dict[tuple[str, int, str], tuple]:
        """``(topic, partition, file) -> (segment row, its batch rows)`` of ``log_dir`` in PREV."""
        folder = self.folders.get(log_dir)
        if folder is None:
            return {}
        seg_path, batch_path = table_path(folder, SEGMENTS), table_path(folder, BATCHES)
        if seg_path is None or batch_path is None:
            return {}
        try:
            rows: dict[tuple[str, int, str], list] = {}
            for row in read_table(batch_path, BATCH_COLUMNS):
                rows.setdefault((row["topic"], row["partition"], row["file"]), []).append(row)
            return {(s["topic"], s["partition"], s["file"]): (s, rows.get((s["topic"], s["partition"], s["file"]), []))
                    for s in read_table(seg_path, SEGMENT_COLUMNS)}
        except (OSError, ValueError, EOFError, KeyError) as exc:
            notice("--previous: %s cannot be read (%s): its rows are not reused" % (folder, exc))
            return {}


class Collector:
    """One run of ``auditor collect``."""

    def __init__(self, node: int, log_dirs: list[str], out: str, *, verify_crc: bool = False,
                 previous: str | None = None, max_read_mb_per_s: float | None = None,
                 bootstrap_server: str | None = None, bootstrap_controller: str | None = None,
                 use_pyarrow: bool = True, use_native_crc: bool = True,
                 notice: Callable[[str], None] | None = None) -> None:
        self.node, self.log_dirs, self.out = node, log_dirs, out
        self.verify_crc, self.previous_root = verify_crc, previous
        self.bootstrap_server, self.bootstrap_controller = bootstrap_server, bootstrap_controller
        self.notice = notice or (lambda text: print("collect: " + text, file=sys.stderr))
        self.throttle = Throttle(max_read_mb_per_s * 1e6) if max_read_mb_per_s else None
        self.pa = _arrow() if use_pyarrow else None
        self.crc32c, self.crc_name = crc32c_implementation(use_native_crc) if verify_crc else (None, None)
        self.counts: dict[str, int] = {k: 0 for k in (
            "partitions", "segments_read", "segments_reused", "snapshot_files", "batches_read", "batches_reused",
            "bytes_read", "small_files", "checkpoint_files", "vanished_files", "skipped_files")}
        self.skipped: dict[str, int] = {}
        self.swaps: list[str] = []
        self.tools: dict[str, str] = {}

    # the checks before anything is read
    def check(self) -> None:
        if not self.log_dirs:
            raise CollectError("--log-dirs names no log dir")
        for folder in self.log_dirs:
            if not os.path.isdir(folder):
                raise CollectError("log dir %s does not exist or is not a folder" % folder)
            try:
                os.listdir(folder)
            except OSError as exc:
                raise CollectError("log dir %s cannot be read: %s" % (folder, exc.strerror or exc)) from exc
            if _inside(self.out, folder):
                raise CollectError("--out %s lies inside log dir %s: nothing may be written there" % (self.out, folder))
        if len({os.path.realpath(f) for f in self.log_dirs}) < len(self.log_dirs):
            raise CollectError("--log-dirs names a log dir twice")

    def run(self) -> dict[str, Any]:
        self.check()
        started, clock = _now(), time.monotonic()
        os.makedirs(self.out, exist_ok=True)
        final = os.path.join(self.out, "broker=%d" % self.node)
        work = os.path.join(self.out, ".broker=%d.partial-%d" % (self.node, os.getpid()))
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        try:
            self._tools()
            prev = Previous(self.previous_root, self.node, self.notice) if self.previous_root else None
            if prev is not None and prev.manifest is None:
                prev = None
            # 1. each log dir's high watermarks, before any segment
            early = [self._read_small(os.path.join(folder, HWM)) for folder in self.log_dirs]
            # 2. the segments, 3. the per-partition small files and the log dirs' other files
            entries = []
            for k, folder in enumerate(self.log_dirs):
                target = os.path.join(work, "logdir=%d" % k)
                os.makedirs(target)
                entries.append(self._segments(k, folder, target, prev))
            for k, folder in enumerate(self.log_dirs):
                self._late_files(folder, os.path.join(work, "logdir=%d" % k), entries[k], early[k])
            manifest = self.manifest([self.entry(k, folder, entries[k]) for k, folder in enumerate(self.log_dirs)],
                                     started, time.monotonic() - clock, prev)
            write_manifest(work, manifest)
            old = os.path.join(self.out, ".broker=%d.old-%d" % (self.node, os.getpid()))
            if os.path.exists(final):
                os.rename(final, old)
            os.rename(work, final)
            shutil.rmtree(old, ignore_errors=True)
            return manifest
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def log_dir(self, k: int, folder: str, target: str) -> dict[str, Any]:
        """Log dir ``folder`` collected into ``target`` as ``logdir=<k>``, its phases in
        order, by itself (the simulator's collected nodes): its manifest entry."""
        early = self._read_small(os.path.join(folder, HWM))
        os.makedirs(target, exist_ok=True)
        found = self._segments(k, folder, target, None)
        self._late_files(folder, target, found, early)
        return self.entry(k, folder, found)

    @staticmethod
    def entry(k: int, folder: str, found: dict[str, Any]) -> dict[str, Any]:
        """A log dir's manifest entry."""
        return {"label": "logdir=%d" % k, "path": os.path.abspath(folder),
                **{key: value for key, value in found.items() if key != "partitions_seen"}}

    def manifest(self, entries: list[dict[str, Any]], started: str, seconds: float,
                 prev: Previous | None = None) -> dict[str, Any]:
        """The node's manifest (``collect.json``) of its log dirs' ``entries``."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "node_id": self.node, "log_dirs": entries,
            "table_format": "parquet" if self.pa is not None else "csv.gz",
            "crc_verified": self.verify_crc, "crc_implementation": self.crc_name,
            "started_at": started, "finished_at": _now(), "seconds": round(seconds, 3),
            "previous": os.path.abspath(self.previous_root) if prev is not None and self.previous_root else None,
            "counts": dict(self.counts), "skipped": dict(sorted(self.skipped.items())),
            "swap_files": self.swaps, "tools": self.tools,
        }

    def _tools(self) -> None:
        """Kafka's tools for ``--bootstrap-*``, before any log file (SPEC 4.7: the quorum's
        status must precede the logs)."""
        jobs = []
        if self.bootstrap_server:
            jobs.append(("topics-describe.txt", ("kafka-topics.sh", "kafka-topics"),
                         ["--bootstrap-server", self.bootstrap_server, "--describe"]))
        if self.bootstrap_controller:
            jobs.append(("metadata-quorum-status.txt", ("kafka-metadata-quorum.sh", "kafka-metadata-quorum"),
                         ["--bootstrap-controller", self.bootstrap_controller, "describe", "--status"]))
        for name, tools, args in jobs:
            tool = next((t for t in map(shutil.which, tools) if t), None)
            if tool is None:
                self.notice("%s is not on the PATH: %s not written" % (tools[0], name))
                self.tools[name] = "tool not on the PATH"
                continue
            try:
                done = subprocess.run([tool, *args], capture_output=True, timeout=600, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                self.notice("%s failed (%s): %s not written" % (tool, exc, name))
                self.tools[name] = "failed: %s" % exc
                continue
            if done.returncode != 0:
                self.notice("%s exited %d: %s not written" % (tool, done.returncode, name))
                self.tools[name] = "exited %d" % done.returncode
                continue
            with open(os.path.join(self.out, name), "wb") as handle:
                handle.write(done.stdout)
            self.tools[name] = "written"

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        self.counts["skipped_files"] += 1

    def _read_small(self, path: str) -> tuple[bytes, int] | None:
        """A small file's bytes and mtime, or None when it does not exist."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
        if self.throttle is not None:
            self.throttle(len(data))
        return data, st.st_mtime_ns

    def _segments(self, k: int, folder: str, target: str, prev: Previous | None) -> dict[str, Any]:
        """Walk log dir ``folder``'s segment and snapshot files into its tables."""
        ext = PARQUET if self.pa is not None else CSV_GZ
        batches = TableWriter(os.path.join(target, BATCHES + ext), BATCH_COLUMNS, self.pa)
        segment_rows: list[tuple] = []
        reusable = prev.segments(os.path.abspath(folder), self.notice) if prev is not None else {}
        partitions: list[tuple[str, int, str, bool]] = []
        counts = {"partitions": 0, "segments": 0, "segments_reused": 0, "batches": 0, "bytes_read": 0,
                  "segment_bytes": 0, "metadata_log": False}
        try:
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if not entry.is_dir():
                    if entry.name not in (HWM, *LATE_LOG_DIR_FILES):
                        self._skip("log dir file not read")
                    continue
                m = PARTITION_DIR.match(entry.name)
                if entry.name.endswith(SKIPPED_DIR_SUFFIXES):
                    self._skip("folder " + entry.name.rsplit("-", 1)[1])
                    continue
                if m is None:
                    self._skip("folder not a partition folder")
                    continue
                topic, partition = m.group("topic"), int(m.group("partition"))
                kraft = topic in KRAFT_TOPICS and partition == 0
                counts["metadata_log"] = counts["metadata_log"] or kraft
                partitions.append((topic, partition, entry.path, kraft))
                counts["partitions"] += 1
                self._partition(topic, partition, entry.path, kraft, batches, segment_rows, reusable, counts, k)
        finally:
            batches.close()
        ext_table = TableWriter(os.path.join(target, SEGMENTS + ext), SEGMENT_COLUMNS, self.pa)
        ext_table.write(segment_rows)
        ext_table.close()
        self.counts["partitions"] += counts["partitions"]
        return {**counts, "tables": {BATCHES: BATCHES + ext, SEGMENTS: SEGMENTS + ext, SMALL_FILES: SMALL_FILES + ext},
                "partitions_seen": partitions}

    def _partition(self, topic: str, partition: int, folder: str, kraft: bool, batches: TableWriter,
                   segment_rows: list[tuple], reusable: dict, counts: dict[str, int], k: int) -> None:
        try:
            names = sorted(e.name for e in os.scandir(folder) if not e.is_dir())
        except FileNotFoundError:
            self.counts["vanished_files"] += 1  # the partition was deleted while collected
            return
        logs = [n for n in names if SEGMENT_NAME.match(n)]
        newest = logs[-1] if logs else None
        for name in names:
            if SEGMENT_NAME.match(name):
                self._walk(topic, partition, folder, name, "segment", name == newest, int(name[:20]), batches,
                           segment_rows, reusable, counts)
            elif kraft and KRAFT_SNAPSHOT_NAME.match(name):
                self._walk(topic, partition, folder, name, "snapshot", False, 0, batches, segment_rows, {}, counts)
            elif name in (LEADER_EPOCH, QUORUM_STATE) and (name == LEADER_EPOCH or kraft):
                continue  # read last (phase 3)
            else:
                if name.endswith(".swap"):
                    self.swaps.append("logdir=%d/%s/%s" % (k, os.path.basename(folder), name))
                self._skip("known non-input file" if name in NON_INPUT_NAMES or name.endswith(NON_INPUT_SUFFIXES)
                           else "unrecognised file")

    def _walk(self, topic: str, partition: int, folder: str, name: str, kind: str, newest: bool, base: int,
              batches: TableWriter, segment_rows: list[tuple], reusable: dict, counts: dict[str, int]) -> None:
        path = os.path.join(folder, name)
        kept = reusable.get((topic, partition, name))
        if kept is not None and not newest and self._reuse(path, kept):
            seg, rows = kept
            n = sum(1 for r in rows if r["row_kind"] == "B")
            verdicts = self.verify_crc
            out_rows = [tuple(r.get(c) if c != "is_valid" or verdicts else None for c, _ in BATCH_COLUMNS) for r in rows]
            row = dict(seg, crc_verified=n if verdicts else 0, crc_unverified=0 if verdicts else n, reused=True,
                       bytes_read=0)
            batches.write(out_rows)
            segment_rows.append(tuple(row[c] for c, _ in SEGMENT_COLUMNS))
            counts["segments_reused"] += 1
            counts["segment_bytes"] += seg["file_bytes"] or 0
            self.counts["segments_reused"] += 1
            self.counts["batches_reused"] += n
            return
        walked = walk_path(path, newest=newest, segment_base=base, verify_crc=self.verify_crc, crc32c=self.crc32c,
                           throttle=self.throttle, missing_ok=True, digests=True)
        if walked is None:
            self.counts["vanished_files"] += 1  # deleted by retention or swapped by the cleaner
            return
        entries, facts, st = walked
        n = len(entries)
        if n:
            # (columns, not rows: the three place columns repeat, no tuple per batch is built)
            by_field = [list(c) for c in zip(*entries)]
            snapshot = name[:-len(".checkpoint")] if kind == "snapshot" else None
            batches.write_columns([[topic] * n, [partition] * n, [name] * n, *by_field,
                                   [None if snapshot else base] * n, [snapshot] * n])
        first, last = facts.get("first_header"), facts.get("last_header")
        last_position = entries[-1][1] if n else None
        segment_rows.append((topic, partition, name, kind, newest, *(facts[c] for c in FILE_FIELDS),
                             st.st_dev if st else None, st.st_ino if st else None, st.st_size if st else None,
                             st.st_mtime_ns if st else None, st.st_ctime_ns if st else None, n, first,
                             last_position, last, False))
        counts["segments"] += 1
        counts["segment_bytes"] += facts["file_bytes"]
        counts["batches"] += n
        counts["bytes_read"] += facts["bytes_read"]
        self.counts["snapshot_files" if kind == "snapshot" else "segments_read"] += 1
        self.counts["batches_read"] += n
        self.counts["bytes_read"] += facts["bytes_read"]

    def _reuse(self, path: str, kept: tuple) -> bool:
        """Whether PREV's rows of this (not newest) segment stand: the same file (device,
        inode, size, mtime, ctime), not the newest in PREV either, read whole there, its
        first and last headers the same again, and verdicts there when they are wanted."""
        seg, rows = kept
        if seg.get("newest") or seg.get("unreadable") is not None or seg.get("kind") != "segment":
            return False
        if self.verify_crc and any(r["row_kind"] == "B" and r["is_valid"] is None for r in rows):
            return False
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (
                    seg["device"], seg["inode"], seg["size"], seg["mtime_ns"], seg["ctime_ns"]):
                return False
            if not rows:
                return seg.get("first_header") is None and header_digest(path, 0, fd) is None
            return (header_digest(path, 0, fd) == seg["first_header"]
                    and header_digest(path, seg["last_position"], fd) == seg["last_header"])
        finally:
            os.close(fd)

    def _late_files(self, folder: str, target: str, entry: dict[str, Any], early: tuple[bytes, int] | None) -> None:
        """Phase 3: the partitions' ``leader-epoch-checkpoint`` and ``quorum-state`` packed,
        the log dir's checkpoint files copied as they are (its high watermarks as read
        before the segments)."""
        ext = PARQUET if self.pa is not None else CSV_GZ
        small = TableWriter(os.path.join(target, SMALL_FILES + ext), SMALL_FILE_COLUMNS, self.pa)
        try:
            for topic, partition, path, kraft in entry["partitions_seen"]:
                for name in (LEADER_EPOCH, QUORUM_STATE) if kraft else (LEADER_EPOCH,):
                    read = self._read_small(os.path.join(path, name))
                    if read is not None:
                        data, mtime = read
                        small.write([(topic, partition, name, len(data), mtime, base64.b64encode(data).decode())])
                        self.counts["small_files"] += 1
        finally:
            small.close()
        for name, read in [(HWM, early), *((n, self._read_small(os.path.join(folder, n))) for n in LATE_LOG_DIR_FILES)]:
            if read is not None:
                with open(os.path.join(target, name), "wb") as handle:
                    handle.write(read[0])
                self.counts["checkpoint_files"] += 1


def write_manifest(folder: str, manifest: dict[str, Any]) -> None:
    """``folder/collect.json``."""
    with open(os.path.join(folder, MANIFEST), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")


def summary(manifest: dict[str, Any], out: str) -> str:
    """What ``collect`` prints: what it read and reused."""
    c = manifest["counts"]
    seconds = manifest["seconds"]
    rate = c["batches_read"] / seconds if seconds > 0 else 0.0
    lines = [
        "collected node %d: %d log dir(s), %d partitions, in %.2f s" % (
            manifest["node_id"], len(manifest["log_dirs"]), c["partitions"], seconds),
        "  read: %d segments, %d snapshot files, %d batches (%.0f batches/s), %d bytes of segments, "
        "%d small files, %d checkpoint files" % (c["segments_read"], c["snapshot_files"], c["batches_read"], rate,
                                                c["bytes_read"], c["small_files"], c["checkpoint_files"]),
        "  reused from --previous: %d segments, %d batches" % (c["segments_reused"], c["batches_reused"]),
        "  CRCs: " + ("verified (%s)" % manifest["crc_implementation"] if manifest["crc_verified"] else
                      "not verified (headers only; --verify-crc reads every byte)"),
        "  skipped: %d files; gone while collected: %d" % (c["skipped_files"], c["vanished_files"]),
    ]
    if manifest["swap_files"]:
        lines.append("  .swap files (a compaction Kafka's recovery would install): " + ", ".join(manifest["swap_files"]))
    lines.append("  wrote %s (%s tables)" % (os.path.join(out, "broker=%d" % manifest["node_id"]),
                                             manifest["table_format"]))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="auditor collect",
        description="Collect this node's part of a snapshot from its log dirs (read-only): batch and segment "
                    "tables, packed small files, checkpoint files. Standard library only.")
    p.add_argument("--broker-id", type=int, required=True, help="This node's id (broker.id / node.id).")
    p.add_argument("--log-dirs", required=True, help="The node's log dirs, comma-separated (log.dirs).")
    p.add_argument("--out", required=True, help="Where to write (OUT/broker=N/); never inside a log dir.")
    p.add_argument("--verify-crc", action="store_true", help="Read every batch whole and check its CRC.")
    p.add_argument("--previous", help="An earlier OUT of this node: unchanged older segments are not read again.")
    p.add_argument("--max-read-mb-per-s", type=float, help="Cap the read rate (MB/s) on a busy node.")
    tools = p.add_mutually_exclusive_group()
    tools.add_argument("--bootstrap-server", help="Also write OUT/topics-describe.txt with kafka-topics.sh.")
    tools.add_argument("--bootstrap-controller",
                       help="Also write OUT/metadata-quorum-status.txt with kafka-metadata-quorum.sh.")
    return p


def main(argv: list[str] | None = None) -> int:
    """``auditor collect``: exit 0, or 2 with a message for bad usage, an unreadable log dir
    or an OUT inside a log dir."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and 2
    if args.max_read_mb_per_s is not None and args.max_read_mb_per_s <= 0:
        print("collect: --max-read-mb-per-s must be above 0", file=sys.stderr)
        return 2
    collector = Collector(args.broker_id, [d for d in args.log_dirs.split(",") if d], args.out,
                          verify_crc=args.verify_crc, previous=args.previous,
                          max_read_mb_per_s=args.max_read_mb_per_s, bootstrap_server=args.bootstrap_server,
                          bootstrap_controller=args.bootstrap_controller)
    try:
        manifest = collector.run()
    except CollectError as exc:
        print("collect: " + str(exc), file=sys.stderr)
        return 2
    except OSError as exc:
        print("collect: %s" % exc, file=sys.stderr)
        return 2
    print(summary(manifest, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
