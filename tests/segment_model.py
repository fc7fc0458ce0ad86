"""A small model of SPEC 3.3's walk of a segment file, written from the SPEC's words over
bytes in memory (the product's walk reads with ``pread`` and keeps a byte account):
what the tests compare :func:`auditor.ingest.segments.walk_segment` against."""

from __future__ import annotations

from dataclasses import dataclass


def _int(data: bytes, at: int, size: int, signed: bool = True) -> int:
    return int.from_bytes(data[at:at + size], "big", signed=signed)


@dataclass(frozen=True)
class Walked:
    """What the walk of one file gives: its batches and quarantined headers
    ``(position, size, base, last, epoch, crc, count, quarantined)``, where it stopped, and
    how its trailing bytes count."""

    entries: tuple[tuple[int, int, int, int, int, int, int, bool], ...]
    stop: int
    tail: str  # "none", "zero" (a preallocated tail of the newest segment) or "invalid"


def walk(data: bytes, newest: bool, segment_base: int = 0) -> Walked:
    """The SPEC 3.3 walk of ``data``."""
    entries = []
    pos, prev_last = 0, segment_base - 1
    while True:
        left = len(data) - pos
        if left <= 17:
            break
        length, magic = _int(data, pos + 8, 4), data[pos + 16]
        if length < 14 or magic not in (0, 1, 2) or length < {0: 14, 1: 22, 2: 49}[magic] or 12 + length > left:
            break
        if magic == 2:
            base, epoch = _int(data, pos, 8), _int(data, pos + 12, 4)
            crc, delta, count = _int(data, pos + 17, 4, False), _int(data, pos + 23, 4), _int(data, pos + 57, 4)
            last = base + delta
            bad = base < 0 or delta < 0 or last > 2**63 - 1 or epoch < -1 or count < 0
        else:
            last, crc = _int(data, pos, 8), _int(data, pos + 12, 4, False)
            compressed = data[pos + 17] & 7 != 0
            base = prev_last + 1 if compressed else last
            epoch, count = -1, last - base + 1
            bad = last < 0 or base > last
        entries.append((pos, 12 + length, base, last, epoch, crc, count, bad))
        if not bad:
            prev_last = last
        pos += 12 + length
    if pos == len(data):
        tail = "none"
    else:
        rest = data[pos:] if len(data) - pos < 18 else data[pos:pos + 17]
        tail = "zero" if newest and not any(rest) else "invalid"
    return Walked(tuple(entries), pos, tail)
