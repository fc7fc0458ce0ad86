"""A faithful writer of etcd WAL files for tests (docs/etcd-wal.md): frames with the
padding flag in the length field's top byte, walpb.Record with the rolling CRC-32C, and
the unwritten, preallocated tail of zeros."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from auditor.ingest.etcd_wal import _messages

METADATA, ENTRY, STATE, CRC, SNAPSHOT = 1, 2, 3, 4, 5


def entry(term: int, index: int, data: bytes = b"", kind: int = 0) -> tuple[int, bytes]:
    return ENTRY, _messages()["Entry"](Type=kind, Term=term, Index=index, Data=data).SerializeToString()


def state(term: int, vote: int, commit: int) -> tuple[int, bytes]:
    return STATE, _messages()["HardState"](term=term, vote=vote, commit=commit).SerializeToString()


def snapshot(index: int, term: int) -> tuple[int, bytes]:
    return SNAPSHOT, _messages()["Snapshot"](index=index, term=term).SerializeToString()


def metadata(data: bytes = b"\x08\x01\x10\x02") -> tuple[int, bytes]:
    return METADATA, data


def encode(records: list[tuple[int, bytes]], prev_crc: int = 0, preallocate: int = 0) -> tuple[bytes, int, list[int]]:
    """The bytes of one WAL file starting with its crc record: (file bytes, running crc at
    the end, byte offset of each record, the crc record first)."""
    record_cls = _messages()["Record"]
    out, offsets, crc = bytearray(), [], prev_crc
    for kind, data in [(CRC, b""), *records]:
        if kind == CRC:
            body = record_cls(type=CRC, crc=crc).SerializeToString()
        else:
            crc = crc32c.crc32c(data, value=crc)
            body = record_cls(type=kind, crc=crc, data=data).SerializeToString()
        pad = (8 - len(body) % 8) % 8
        length = len(body) | ((0x80 | pad) << 56 if pad else 0)
        offsets.append(len(out))
        out += struct.pack("<Q", length) + body + b"\x00" * pad
    if preallocate > len(out):
        out += b"\x00" * (preallocate - len(out))
    return bytes(out), crc, offsets


def write(path: Path, records: list[tuple[int, bytes]], prev_crc: int = 0, preallocate: int = 4096) -> tuple[int, list[int]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    data, crc, offsets = encode(records, prev_crc, preallocate)
    path.write_bytes(data)
    return crc, offsets
