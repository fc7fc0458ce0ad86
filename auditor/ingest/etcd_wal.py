"""etcd's write-ahead log, decoded in Spark (the mapping into the auditor's model:
:mod:`auditor.ingest.etcd`). Format facts: ``docs/etcd-wal.md``.

Each WAL file is one row of Spark's binary file source and is decoded by one task, in
vectorised Arrow batches (``mapInArrow``); nothing is collected to the driver. A file is
self-contained: its first record (type ``crc``) carries the running CRC-32C of the files
before it, and every later record's ``crc`` must equal the update of the running value
with that record's ``data``.

One output row per record, with its byte offset and the running CRC after it (a member's
next file must start from its last file's final value: checked across files, later). Entry data (keys, values) is never kept:
only its size. A record that cannot be read (a frame running past the end, bytes that are
not a record, a CRC mismatch) is a row with ``problem`` set; decoding of that file stops
there, as etcd's own reader does. ``torn`` says whether the bad record's bytes hold a
512-byte sector of zeros (etcd's test for a torn write, which it repairs when it is in the
member's last file).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

import pyarrow as pa

RECORD_TYPES = {1: "metadata", 2: "entry", 3: "state", 4: "crc", 5: "snapshot"}
SECTOR = 512
FRAME = 8

#: What :func:`decode_wal` returns per record (Arrow and Spark types alike).
COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("record_no", pa.int64()), ("byte_offset", pa.int64()), ("record_type", pa.string()), ("crc", pa.int64()),
    ("term", pa.int64()), ("index", pa.int64()), ("entry_type", pa.int32()), ("data_bytes", pa.int64()),
    ("entry_crc", pa.int64()),
    ("hs_term", pa.int64()), ("hs_vote", pa.string()), ("hs_commit", pa.int64()),
    ("snap_index", pa.int64()), ("snap_term", pa.int64()),
    ("problem", pa.string()), ("torn", pa.bool_()),
)
_SPARK_TYPES = {pa.int64(): "bigint", pa.int32(): "int", pa.string(): "string", pa.bool_(): "boolean"}
SPARK_SCHEMA = "uri string, " + ", ".join(f"{name} {_SPARK_TYPES[t]}" for name, t in COLUMNS)
ARROW_SCHEMA = pa.schema([("uri", pa.string()), *COLUMNS])


@cache
def _messages() -> dict[str, Any]:
    """Message classes for walpb.Record, raftpb.Entry, raftpb.HardState and walpb.Snapshot,
    built from descriptors (field numbers as etcd's .proto files declare them)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    spec = {
        "Record": [("type", 1, f.TYPE_INT64), ("crc", 2, f.TYPE_UINT32), ("data", 3, f.TYPE_BYTES)],
        "Entry": [("Type", 1, f.TYPE_INT32), ("Term", 2, f.TYPE_UINT64), ("Index", 3, f.TYPE_UINT64),
                  ("Data", 4, f.TYPE_BYTES)],
        "HardState": [("term", 1, f.TYPE_UINT64), ("vote", 2, f.TYPE_UINT64), ("commit", 3, f.TYPE_UINT64)],
        "Snapshot": [("index", 1, f.TYPE_UINT64), ("term", 2, f.TYPE_UINT64)],
    }
    proto = descriptor_pb2.FileDescriptorProto(name="auditor_etcd_wal.proto", package="auditor_etcd_wal",
                                               syntax="proto2")
    for name, fields in spec.items():
        message = proto.message_type.add(name=name)
        for field_name, number, field_type in fields:
            message.field.add(name=field_name, number=number, type=field_type, label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()  # our own pool: nothing shared with other users of protobuf
    pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"auditor_etcd_wal.{name}"))
            for name in spec}


def _torn(data: bytes, file_offset: int) -> bool:
    """etcd's torn-write test: a sector-aligned chunk of the record that is all zeros."""
    pos = 0
    while pos < len(data):
        size = min(SECTOR - (file_offset + pos) % SECTOR, len(data) - pos)
        if not any(data[pos:pos + size]):
            return True
        pos += size
    return False


def decode_wal(content: bytes) -> list[dict[str, Any]]:
    """Decode one WAL file: a row per record (see :data:`COLUMNS`), the last one with
    ``problem`` set when the file does not end cleanly."""
    import crc32c
    from google.protobuf.message import DecodeError

    m = _messages()
    rows: list[dict[str, Any]] = []
    offset, crc = 0, 0
    while offset + FRAME <= len(content):
        (length_field,) = struct.unpack_from("<Q", content, offset)
        if length_field == 0:
            break  # the preallocated, unwritten rest of the file
        size = length_field & ~(0xFF << 56)
        pad = (length_field >> 56) & 0x7 if length_field >> 63 else 0
        row: dict[str, Any] = {"record_no": len(rows), "byte_offset": offset}
        body = content[offset + FRAME: offset + FRAME + size + pad]
        if len(body) < size + pad:
            rows.append({**row, "problem": "the record runs past the end of the file", "torn": True})
            break
        record = m["Record"]()
        try:
            record.ParseFromString(body[:size])
        except DecodeError:
            rows.append({**row, "problem": "bytes that are not a WAL record", "torn": _torn(body, offset + FRAME)})
            break
        kind = RECORD_TYPES.get(record.type)
        if kind is None:
            rows.append({**row, "problem": f"unknown record type {record.type}", "torn": _torn(body, offset + FRAME)})
            break
        row["record_type"] = kind
        if kind == "crc":
            crc = record.crc  # the running CRC of the files before this one
        else:
            crc = crc32c.crc32c(record.data, value=crc)
            if record.HasField("crc") and record.crc != crc:
                rows.append({**row, "problem": "CRC mismatch (the record or one before it was changed)",
                             "torn": _torn(body, offset + FRAME)})
                break
        try:
            if kind == "entry":
                entry = m["Entry"].FromString(record.data)
                row.update(term=entry.Term, index=entry.Index, entry_type=entry.Type, data_bytes=len(entry.Data),
                           entry_crc=crc32c.crc32c(record.data))
            elif kind == "state":
                state = m["HardState"].FromString(record.data)
                # a member id is a random uint64, shown in hex as etcdctl shows it
                row.update(hs_term=state.term, hs_vote=format(state.vote, "x"), hs_commit=state.commit)
            elif kind == "snapshot":
                snap = m["Snapshot"].FromString(record.data)
                row.update(snap_index=snap.index, snap_term=snap.term)
        except DecodeError:
            rows.append({**row, "problem": f"a {kind} record whose data does not decode", "torn": False})
            break
        row["crc"] = crc  # the running CRC after this record: a member's next file starts from it
        rows.append(row)
        offset += FRAME + size + pad
    return rows


def _decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: binary file rows (their URIs) in, one row per WAL record out.
    Each file is read here, by the task that decodes it (see :func:`read_wal_records`)."""
    from auditor.ingest.lines import uri_to_path

    for batch in batches:
        for uri in batch.column("uri").to_pylist():
            with open(uri_to_path(uri), "rb") as f:
                rows = decode_wal(f.read())
            columns: dict[str, list[Any]] = {"uri": [uri] * len(rows)}
            for name, _ in COLUMNS:
                columns[name] = [r.get(name) for r in rows]
            yield pa.RecordBatch.from_pydict(columns, schema=ARROW_SCHEMA)


def read_wal_records(spark: Any, files: Sequence[tuple[int, Any]]) -> Any:
    """DataFrame of every record of the WAL ``files`` (``(file_id, InputFile)`` pairs):
    ``file_id`` and :data:`COLUMNS`. Each file is one row of the binary file source and one
    task, which reads and decodes it (no shuffle of file contents, nothing on the driver).

    The binary file source gives the files and the tasks; its ``content`` column is not
    selected, so the JVM never holds a file: etcd preallocates every WAL file to 64 MB, and
    two tasks each holding a file, its row copy and its Arrow copy ran a 2 GB driver heap
    out of memory (in local mode the executors share it). The decoding task reads the file
    itself, so WAL files must be on a local or mounted file system, as every input is
    (README "Limits"). Each file is its own scan (the file source would pack several into
    one task); a member keeps a handful of WAL files, so a few dozen scans at most."""
    from functools import reduce

    from pyspark.sql import functions as F

    from auditor.frames import local_frame
    from auditor.ingest.lines import with_file_ids

    if not files:
        return local_frame(spark, [], "file_id int, " + SPARK_SCHEMA.split(", ", 1)[1])
    scans = [spark.read.format("binaryFile").load(f.path).select(F.col("_metadata.file_path").alias("uri"))
             for _, f in files]
    raw = reduce(lambda a, b: a.unionByName(b), scans)
    return with_file_ids(spark, raw, files, raw.mapInArrow(_decode_batches, SPARK_SCHEMA))
