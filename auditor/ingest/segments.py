"""Kafka's own segment files (``<20-digit base>.log``, SPEC 3.3), decoded where Spark runs
its tasks. Format facts: ``docs/kafka-segments.md``.

The walk reads each batch's header and nothing more (61 bytes for a v2 batch, 18 for a
legacy entry): the next batch starts at ``position + 12 + length``, so a segment of 16 KiB
batches is read at well under 1% of its bytes. Control batches (transaction markers,
LeaderChange) are small and read whole. ``verify_crc`` reads every batch whole once and
compares its CRC (CRC-32C for magic 2, CRC-32 for magic 0 and 1).

:func:`walk_segment` is the walk of one open file: a row per batch (``B``), per quarantined
header (``Q``, a value Kafka never writes; the walk goes on after it) and one per file
(``F``: where and why the walk stopped, and the file's bytes accounted for). It is plain
Python over ``os.pread``, so the tests run it on any bytes; :func:`read_segments` runs it in
Spark's tasks (``mapInArrow`` over a list of files, each task opening its own), so no file
content ever goes through the driver. Payload bytes are never kept: a batch row holds
offsets, epochs, sizes, CRCs, counts and flags only.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

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
#: How a walk ends (``F`` rows' ``stop``).
END, SHORT, BAD_LENGTH, BAD_MAGIC, BELOW_MINIMUM, PAST_END, SHRUNK = (
    "end", "at most 17 bytes remain", "length below 14", "magic not 0, 1 or 2", "length below its magic's minimum",
    "batch runs past the end of the file", "file shrank while read")

#: The decoded rows (Arrow and Spark types alike).
COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("file_id", pa.int32()), ("row_kind", pa.string()), ("position", pa.int64()), ("size", pa.int64()),
    ("magic", pa.int32()), ("base_offset", pa.int64()), ("last_offset", pa.int64()), ("epoch", pa.int32()),
    ("crc", pa.int64()), ("record_count", pa.int64()), ("codec", pa.int32()),
    ("is_transactional", pa.bool_()), ("is_control", pa.bool_()), ("producer_id", pa.int64()),
    ("producer_epoch", pa.int32()), ("base_sequence", pa.int32()), ("control_type", pa.string()),
    ("leader_id", pa.int32()), ("is_valid", pa.bool_()), ("error", pa.string()),
    ("last_control_type", pa.string()),
    # F rows: the file's size when opened and where its bytes went (SPEC 3.3 "Accounting")
    ("file_bytes", pa.int64()), ("batch_bytes", pa.int64()), ("quarantined_bytes", pa.int64()),
    ("tail_position", pa.int64()), ("tail_bytes", pa.int64()), ("tail_zero", pa.bool_()),
    ("vanished_bytes", pa.int64()), ("bytes_read", pa.int64()), ("stop", pa.string()),
    ("crc_verified", pa.int64()), ("crc_unverified", pa.int64()), ("unreadable", pa.string()),
)
_SPARK_TYPES = {pa.int64(): "bigint", pa.int32(): "int", pa.string(): "string", pa.bool_(): "boolean"}
SPARK_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[t]}" for name, t in COLUMNS)
ARROW_SCHEMA = pa.schema(list(COLUMNS))
#: The file list :func:`read_segments` hands its tasks.
FILE_LIST_DDL = "file_id int, path string, newest boolean, segment_base_offset bigint"


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
            name = CONTROL_TYPES.get(type_id, f"UNKNOWN({type_id})")
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
        return f"baseOffset {base} is negative"
    if delta < 0:
        return f"lastOffsetDelta {delta} is negative"
    if last > MAX_OFFSET:
        return f"last offset {last} is above 2^63 - 1"
    if epoch < -1:
        return f"partitionLeaderEpoch {epoch} is below -1"
    if count < 0:
        return f"recordsCount {count} is negative"
    return None


#: The fields of a ``B`` or ``Q`` row, in the order :func:`walk_entries` gives them.
ENTRY_FIELDS = ("row_kind", "position", "size", "magic", "base_offset", "last_offset", "epoch", "crc",
                "record_count", "codec", "is_transactional", "is_control", "producer_id", "producer_epoch",
                "base_sequence", "control_type", "leader_id", "is_valid", "error", "last_control_type")


def walk_segment(read: Callable[[int, int], bytes], size: int, *, newest: bool, segment_base: int,
                 verify_crc: bool = False) -> list[dict[str, Any]]:
    """Walk one segment file of ``size`` bytes (its size when opened), reading with
    ``read(position, n)`` (fewer bytes back: the file shrank). Returns the ``B`` and ``Q``
    rows in file order, then the file's ``F`` row (see :data:`COLUMNS`; ``file_id`` unset).

    ``newest``: the replica's newest segment (a zero tail there is preallocated space);
    ``segment_base``: its base offset (a legacy wrapper's base when it comes first).
    """
    entries: list[tuple[Any, ...]] = []
    facts = walk_entries(read, size, entries, newest=newest, segment_base=segment_base, verify_crc=verify_crc)
    return [dict(zip(ENTRY_FIELDS, e)) for e in entries] + [facts]


def walk_entries(read: Callable[[int, int], bytes], size: int, out: list[tuple[Any, ...]], *, newest: bool,
                 segment_base: int, verify_crc: bool = False) -> dict[str, Any]:
    """:func:`walk_segment`'s walk: appends each ``B`` and ``Q`` row to ``out`` as a tuple of
    :data:`ENTRY_FIELDS` and returns the ``F`` row (the decoding tasks build Arrow columns
    from the tuples: no dictionary per batch)."""
    import crc32c

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
                    valid = crc32c.crc32c(memoryview(whole)[21:]) == crc
            problem = _quarantine(base, last, epoch, delta, count)
            entry = (pos, total, 2, base, last, epoch, crc, count, codec, attributes & 0x10 != 0, control,
                     producer_id, producer_epoch, base_sequence, control_type, leader, valid)
        else:
            last, _, crc, _, attributes = unpack_legacy(head)
            codec = attributes & 0x07
            needed = LEGACY_HEADER_BYTES
            base = last if codec == 0 else prev_last + 1
            problem = (f"offset {last} is negative" if last < 0 else
                       f"a compressed entry at offset {last} follows a batch ending at {prev_last}"
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
            append(("Q", *entry, problem, last_type))
            quarantined += total
        else:
            append(("B", *entry, None, last_type))
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
            "crc_unverified": unverified}


def read_entries(path: str, *, newest: bool, segment_base: int, verify_crc: bool = False
                 ) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """:func:`walk_entries` over the file at ``path``, opened once, read with ``pread``:
    ``(entries, F row)``. A file that cannot be opened or read is no entry and an ``F`` row
    with ``unreadable`` set (its size when opened, if it was)."""
    def unreadable(exc: OSError, size: int = 0) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
        return [], {"row_kind": "F", "file_bytes": size, "batch_bytes": 0, "quarantined_bytes": 0, "tail_bytes": 0,
                    "vanished_bytes": size, "bytes_read": 0, "crc_verified": 0, "crc_unverified": 0,
                    "stop": END, "unreadable": exc.strerror or str(exc)}

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return unreadable(exc)
    try:
        size = os.fstat(fd).st_size  # the size when opened: a growing file is read up to it
        entries: list[tuple[Any, ...]] = []
        read = _reader(fd, size)

        try:
            return entries, walk_entries(read, size, entries, newest=newest, segment_base=segment_base,
                                         verify_crc=verify_crc)
        except OSError as exc:
            return unreadable(exc, size)
    finally:
        os.close(fd)


#: Batches smaller than this on average are read through a window of :data:`WINDOW` bytes:
#: the operating system reads their pages whole anyway, and one ``pread`` per window costs
#: less than one per batch. Larger batches are read header by header.
SMALL_BATCH = 4096
WINDOW = 1 << 20


def _reader(fd: int, size: int) -> Callable[[int, int], bytes]:
    """``read(position, n)`` over the open file ``fd``: ``pread`` per call while batches
    are large, through a window of the file while they are small (what the walk counts as
    read, ``bytes_read``, is what its rules need either way)."""
    window = b""
    start = calls = 0

    def read(position: int, n: int) -> bytes:
        nonlocal window, start, calls
        calls += 1
        offset = position - start
        if 0 <= offset and offset + n <= len(window):
            return window[offset:offset + n]
        if position < calls * SMALL_BATCH and n <= WINDOW:  # small batches so far: a window
            window, start = os.pread(fd, min(WINDOW, size - position), position), position
            return window[:n]  # (shorter: the file shrank)
        return os.pread(fd, n, position)

    return read


def read_file(path: str, *, newest: bool, segment_base: int, verify_crc: bool = False) -> list[dict[str, Any]]:
    """:func:`read_entries` as :func:`walk_segment`'s rows."""
    entries, facts = read_entries(path, newest=newest, segment_base=segment_base, verify_crc=verify_crc)
    return [dict(zip(ENTRY_FIELDS, e)) for e in entries] + [facts]


#: The ``F`` row's own columns.
FILE_FIELDS = tuple(name for name, _ in COLUMNS[1:] if name not in ENTRY_FIELDS)
#: Rows per Arrow batch a decoding task yields (about).
ROWS_PER_BATCH = 1 << 16


_TYPES = dict(COLUMNS)


def _arrow_batch(entry_ids: list[int], entries: list[tuple[Any, ...]]) -> pa.RecordBatch:
    """The Arrow batch of entries (tuples of :data:`ENTRY_FIELDS`) and their files' ids."""
    n = len(entries)
    by_field = list(zip(*entries)) if entries else [()] * len(ENTRY_FIELDS)
    arrays = {"file_id": pa.array(entry_ids, pa.int32())}
    for k, name in enumerate(ENTRY_FIELDS):
        arrays[name] = pa.array(by_field[k], _TYPES[name])
    for name in FILE_FIELDS:
        arrays[name] = pa.nulls(n, _TYPES[name])
    return pa.RecordBatch.from_arrays([arrays[name] for name, _ in COLUMNS], schema=ARROW_SCHEMA)


def _file_batch(files: list[tuple[int, dict[str, Any]]]) -> pa.RecordBatch:
    """The Arrow batch of ``F`` rows."""
    columns = {"file_id": [i for i, _ in files], **{name: [f.get(name) for _, f in files] for name, _ in COLUMNS[1:]}}
    return pa.RecordBatch.from_pydict(columns, schema=ARROW_SCHEMA)


def _decoder(verify_crc: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``mapInArrow`` body: file list rows in, one row per batch and file out, each file
        read here, by the task that decodes it."""
        ids: list[int] = []
        entries: list[tuple[Any, ...]] = []
        files: list[tuple[int, dict[str, Any]]] = []
        for batch in batches:
            listed = batch.to_pydict()
            for file_id, path, newest, base in zip(listed["file_id"], listed["path"], listed["newest"],
                                                   listed["segment_base_offset"], strict=True):
                found, facts = read_entries(path, newest=bool(newest), segment_base=base, verify_crc=verify_crc)
                ids.extend([file_id] * len(found))
                entries.extend(found)
                files.append((file_id, facts))
                if len(entries) >= ROWS_PER_BATCH:
                    yield _arrow_batch(ids, entries)
                    ids, entries = [], []
        if entries:
            yield _arrow_batch(ids, entries)
        if files:
            yield _file_batch(files)
    return decode


def read_segments(spark: Any, files: Sequence[tuple[int, str, bool, int]], verify_crc: bool = False,
                  spill: str | None = None) -> Any:
    """DataFrame of the rows (:data:`COLUMNS`) of the segment ``files``
    (``(file_id, path, newest, segment_base_offset)``). The file list is spread over the
    session's cores and each task opens and walks its own files: only paths go through
    the driver. Every executor must see the same paths (as with dumps)."""
    from auditor.frames import local_frame

    listed = local_frame(spark, list(files), FILE_LIST_DDL, spill=spill)
    if len(files) > 1:
        # dealt round-robin over a few tasks per core: a task walks its own files
        listed = listed.repartition(min(len(files), spark.sparkContext.defaultParallelism * 4))
    return listed.mapInArrow(_decoder(verify_crc), SPARK_SCHEMA)
