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


def wal_name(seq: int, index: int) -> str:
    """etcd's file name: ``<seq>-<index>.wal``, 16 hex digits each (index = the first entry's)."""
    return f"{seq:016x}-{index:016x}.wal"


def write_member(folder: Path, files: list[list[tuple[int, bytes]]], preallocate: int = 4096) -> list[tuple[Path, list[int]]]:
    """Write one member's WAL files under ``folder/member/wal``, the CRC chained from each
    file to the next as etcd does; each file is named after its first entry's index (the
    previous file's last entry + 1 when it has none). Returns each file with its record
    offsets (the crc record first)."""
    out: list[tuple[Path, list[int]]] = []
    crc, next_index = 0, 0
    for seq, records in enumerate(files):
        indexes = [_messages()["Entry"].FromString(d).Index for k, d in records if k == ENTRY]
        first = indexes[0] if indexes else next_index
        path = folder / "member" / "wal" / wal_name(seq, first)
        crc, offsets = write(path, records, prev_crc=crc, preallocate=preallocate)
        out.append((path, offsets))
        next_index = (indexes[-1] + 1) if indexes else next_index
    return out


def append(path: Path, records: list[tuple[int, bytes]]) -> None:
    """Append ``records`` to an existing WAL file after its last readable record, carrying
    its rolling CRC on, as etcd does when it reopens a WAL to write (the preallocated zeros
    after it are written over)."""
    from auditor.ingest.etcd_wal import FRAME, decode_wal

    content = bytearray(path.read_bytes())
    rows = [r for r in decode_wal(bytes(content)) if not r.get("problem")]
    last = rows[-1]
    (length_field,) = struct.unpack_from("<Q", content, last["byte_offset"])
    size = length_field & ~(0xFF << 56)
    pad = (length_field >> 56) & 0x7 if length_field >> 63 else 0
    end = last["byte_offset"] + FRAME + size + pad
    data, _, _ = encode(records, prev_crc=last["crc"])
    first_len = struct.unpack_from("<Q", data, 0)[0]
    skip = FRAME + (first_len & ~(0xFF << 56)) + ((first_len >> 56) & 0x7 if first_len >> 63 else 0)
    data = data[skip:]  # without encode's own leading crc record
    content[end:end + len(data)] = data
    path.write_bytes(bytes(content))
