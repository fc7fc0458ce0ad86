"""Write Kafka's binary record batches (magic 2) as a broker stores them in a segment file
(``docs/kafka-segments.md``): the 61-byte header, records in Kafka's record encoding, and the
batch's CRC-32C over the bytes from ``attributes`` to its end.

Used by ``auditor simulate --format segments`` and the tests; the reader never imports it.

The simulator gives every batch a CRC that stands for its content (equal content, equal
CRC: :func:`auditor.simulator.kafka_text.content_crc`), and its dumps print it. A batch
written here carries exactly that CRC, so a cluster written as segments and as dumps holds
the same batches: the last four bytes of the last record's value (a marker's
``coordinatorEpoch``) are chosen so the batch's CRC-32C comes out as asked. CRC-32C is
affine over GF(2): appending four bytes ``x`` to bytes whose CRC is ``c`` gives
``A(c) xor L(x)`` with ``L`` linear and independent of ``c``, so ``x = L^-1(target xor
A(c))``, one 32x32 bit matrix inverted once. Record sizes match what the dumps print
(``Batch.size``): positions and sizes agree too.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Sequence

from auditor.collect import crc32c_table
from auditor.simulator.kafka_text import Batch
from auditor.simulator.kraft_text import MetaBatch

_HEADER_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (40 bytes, inside the CRC)
_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
CONTROL_IDS = {"ABORT": 0, "COMMIT": 1, "LEADER_CHANGE": 2, "SNAPSHOT_HEADER": 3, "SNAPSHOT_FOOTER": 4,
               "KRAFT_VERSION": 5, "KRAFT_VOTERS": 6}


def varint(value: int) -> bytes:
    """An unsigned varint (the compact arrays and tagged fields of Kafka's messages)."""
    out = bytearray()
    while True:
        if value < 0x80:
            out.append(value)
            return bytes(out)
        out.append((value & 0x7F) | 0x80)
        value >>= 7


def zigzag(value: int) -> bytes:
    """A record varint (zig-zag, as protobuf's sint64)."""
    return varint((value << 1) ^ (value >> 63))


def record(offset_delta: int, value: bytes, key: bytes | None = None, timestamp_delta: int = 0) -> bytes:
    """One record (KAFKA-FORMATS 5.2), no headers."""
    body = b"".join((b"\x00", zigzag(timestamp_delta), zigzag(offset_delta),
                     zigzag(-1) if key is None else zigzag(len(key)) + key, zigzag(len(value)), value, zigzag(0)))
    return zigzag(len(body)) + body


@functools.cache
def _inverse() -> tuple[int, ...]:
    """Columns of ``L^-1``: the four bytes (as a big-endian int) whose ``L`` is bit ``i``."""
    import crc32c

    zero = crc32c.crc32c(b"\x00\x00\x00\x00")

    def linear(x: int) -> int:
        return crc32c.crc32c(x.to_bytes(4, "big")) ^ zero

    # Gauss-Jordan over GF(2): rows pair L(x) with x, starting from the unit vectors
    rows = [(linear(1 << i), 1 << i) for i in range(32)]
    inverse = [0] * 32
    for bit in range(32):
        pivot = next(i for i in range(bit, 32) if rows[i][0] >> bit & 1)
        rows[bit], rows[pivot] = rows[pivot], rows[bit]
        for i in range(32):
            if i != bit and rows[i][0] >> bit & 1:
                rows[i] = (rows[i][0] ^ rows[bit][0], rows[i][1] ^ rows[bit][1])
    for bit in range(32):
        inverse[bit] = rows[bit][1]
    return tuple(inverse)


def forge(prefix_crc: int, target: int) -> bytes:
    """The four bytes that, appended to bytes whose CRC-32C is ``prefix_crc``, give CRC-32C
    ``target``."""
    import crc32c

    want = target ^ crc32c.crc32c(b"\x00\x00\x00\x00", value=prefix_crc)
    x, inverse, bit = 0, _inverse(), 0
    while want:
        if want & 1:
            x ^= inverse[bit]
        want >>= 1
        bit += 1
    return x.to_bytes(4, "big")


def _value_size(offset_delta: int, record_bytes: int) -> int:
    """The value length that makes a record ``record_bytes`` long on disk (at least 4: the
    chosen CRC bytes sit there)."""
    def size(v: int) -> int:
        body = 1 + len(zigzag(0)) + len(zigzag(offset_delta)) + len(zigzag(-1)) + len(zigzag(v)) + v + 1
        return len(zigzag(body)) + body

    v = record_bytes
    while v > 4 and size(v) > record_bytes:
        v -= 1
    return v


@functools.lru_cache(maxsize=4096)
def _records(count: int, record_bytes: int) -> bytes:
    """``count`` records of ``record_bytes`` each, values zero (the same for every batch of
    that shape: only the last value's last four bytes differ, chosen per batch)."""
    return b"".join(record(i, bytes(_value_size(i, record_bytes))) for i in range(count))


def encode_batch(b: Batch, *, corrupt: bool | None = None) -> bytes:
    """Batch ``b`` as a broker stores it: ``b.size`` bytes whose CRC-32C field is ``b.crc``
    and matches the bytes (``corrupt``, default ``not b.valid``: one value byte is then
    changed after the CRC was made, as damage on disk would)."""
    import crc32c

    p = b.producer
    control = p is not None and p.control is not None
    attributes = (0x10 if p is not None and p.transactional else 0) | (0x20 if control else 0)
    producer_id, producer_epoch = (p.producer_id, p.producer_epoch) if p is not None else (-1, -1)
    base_sequence = -1 if p is None or control else p.base_sequence
    tail = _HEADER_TAIL.pack(attributes, b.last_offset - b.base_offset, b.timestamp, b.timestamp, producer_id,
                             producer_epoch, base_sequence, b.count)
    if control:
        assert p is not None and p.control is not None
        # one record: attributes, timestampDelta, offsetDelta, key (version, type), value
        # (version, coordinatorEpoch: the four chosen bytes), no headers
        key = struct.pack(">hh", 0, CONTROL_IDS[p.control])
        fields = b"".join((b"\x00", zigzag(0), zigzag(0), zigzag(len(key)), key, zigzag(6)))
        prefix = tail + zigzag(len(fields) + 6 + 1) + fields + struct.pack(">h", 0)
        body = prefix + forge(crc32c.crc32c(prefix), _crc_before_suffix(b.crc, b"\x00")) + b"\x00"
    else:
        # the last record ends with its value's last four bytes, then its header count (0)
        prefix = tail + _records(b.count, b.bytes_per_record)[:-5]
        body = prefix + forge(crc32c.crc32c(prefix), _crc_before_suffix(b.crc, b"\x00")) + b"\x00"
    if corrupt if corrupt is not None else not b.valid:
        spot = len(body) - 6
        body = body[:spot] + bytes([body[spot] ^ 0x5A]) + body[spot + 1:]
    return _HEAD.pack(b.base_offset, len(body) + 9, b.epoch, 2) + struct.pack(">I", b.crc) + body


def _crc_before_suffix(target: int, suffix: bytes) -> int:
    """The CRC-32C the bytes before ``suffix`` must have for the whole to have ``target``
    (CRC-32C run backwards over ``suffix``, byte by byte: a table entry is known by its
    top byte)."""
    reg = target ^ 0xFFFFFFFF
    for byte in reversed(suffix):
        top = reg >> 24
        index = _TOP_INDEX[top]
        reg = ((reg ^ _TABLE[index]) << 8 & 0xFFFFFFFF) | (index ^ byte)
    return reg ^ 0xFFFFFFFF


_TABLE = crc32c_table()
_TOP_INDEX = {t >> 24: i for i, t in enumerate(_TABLE)}


def encode_segment(batches: Sequence[Batch], torn_bytes: int = 0) -> bytes:
    """A segment file of ``batches``; ``torn_bytes``: that many bytes of a torn write after
    them (the start of a longer batch that was never completed; never all zeros, which
    would be a preallocated tail)."""
    out = [encode_batch(b) for b in batches]
    if torn_bytes:
        after = batches[-1].last_offset + 1 if batches else 0
        epoch = batches[-1].epoch if batches else 0
        unfinished = Batch(after, after + torn_bytes // 18 + 1, epoch, 0, bytes_per_record=18)
        partial = encode_batch(unfinished)[:torn_bytes]
        out.append(partial if any(partial) else b"\xff" * torn_bytes)
    return b"".join(out)


#: The metadata log's record kinds (``MetaBatch.records``) as control types.
META_CONTROL = {"LeaderChange": "LEADER_CHANGE", "SnapshotHeader": "SNAPSHOT_HEADER",
                "SnapshotFooter": "SNAPSHOT_FOOTER", "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS"}


def _compact_voters(voters: Sequence[int]) -> bytes:
    """A compact array of ``{VoterId int32}`` structs, each with no tagged fields."""
    return varint(len(voters) + 1) + b"".join(struct.pack(">i", v) + b"\x00" for v in voters)


def _meta_value(kind: str, leader: int | None, voters: Sequence[int], timestamp: int) -> bytes:
    """A control record's value (a flexible-version message, version 0)."""
    if kind == "LeaderChange":
        voted = voters or ((leader,) if leader is not None else ())
        return struct.pack(">hi", 0, -1 if leader is None else leader) + _compact_voters(voted) \
            + _compact_voters(voted) + b"\x00"
    if kind == "SnapshotHeader":
        return struct.pack(">hq", 0, timestamp) + b"\x00"
    if kind == "KRaftVersion":
        return struct.pack(">hh", 0, 1) + b"\x00"
    if kind == "KRaftVoters":
        return struct.pack(">h", 0) + _compact_voters(voters) + b"\x00"
    return struct.pack(">h", 0) + b"\x00"  # SnapshotFooter


def encode_meta_batch(b: MetaBatch) -> bytes:
    """A batch of KRaft's metadata log or of a snapshot (:class:`MetaBatch`) as Kafka stores
    it: a control batch of control records (LeaderChange with its leader and voters,
    SnapshotHeader, SnapshotFooter, KRaftVersion, KRaftVoters) or data records, with CRC
    ``b.crc``: the low four bytes of maxTimestamp are chosen for it (a metadata batch's
    record values are too short to hold them); ``b.valid`` False changes a record byte after."""
    import crc32c

    records = []
    for i, kind in enumerate(b.records):
        if kind == "data":
            records.append(record(i, bytes(20)))
        else:
            key = struct.pack(">hh", 0, CONTROL_IDS[META_CONTROL[kind]])
            records.append(record(i, _meta_value(kind, b.leader_id, b.voters, b.timestamp), key))
    tail = _HEADER_TAIL.pack(0x20 if b.is_control else 0, len(b.records) - 1, b.timestamp, b.timestamp, -1, -1, -1,
                             len(b.records))
    body = tail + b"".join(records)
    # maxTimestamp is bytes 14..22 of the body (attributes on): its low four bytes, 18..22
    prefix, suffix = body[:18], body[22:]
    body = prefix + forge(crc32c.crc32c(prefix), _crc_before_suffix(b.crc, suffix)) + suffix
    if not b.valid:
        spot = len(body) - 2
        body = body[:spot] + bytes([body[spot] ^ 0x5A]) + body[spot + 1:]
    return _HEAD.pack(b.base_offset, len(body) + 9, b.epoch, 2) + struct.pack(">I", b.crc) + body


def encode_meta_segment(batches: Iterable[MetaBatch]) -> bytes:
    """A metadata log segment, or a snapshot file, of ``batches``."""
    return b"".join(encode_meta_batch(b) for b in batches)
