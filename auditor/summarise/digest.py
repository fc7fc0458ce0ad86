"""What a run of batches is summarised into, as Column builders (SPEC 4.4's comparisons done
on summaries first; see docs/design.md "Summaries and drill-down").

A replica's batches are summarised per **window** of offsets (the batch's base offset
shifted right by :data:`WINDOW_BITS`) and per epoch, with sums that add up across files and
windows:

- counts, record counts, lowest base, highest base and last offset;
- a **digest** of the multiset of ``(base, last, epoch, crc)``: the sum, modulo 2^64, of
  two independent 64-bit hashes (xxHash64 with two seeds). Two windows with the same digest
  hold the same batches (up to a collision of both hashes);
- a **chain** sum, modulo 2^64, of ``G(base) - G(last + 1)`` for two independent hashes G.
  For batches that tile ``[a, b]`` with no gap, overlap or duplicate, every batch but the
  first starts where another ends, so the sum telescopes to ``G(a) - G(b + 1)``; any gap,
  overlap or repeated batch breaks that (each batch is an edge ``base -> last + 1`` going
  forward, so balanced ends mean one path);
- how many batches lack a CRC or are printed ``isvalid: false``.

Every aggregate has a fixed-width buffer, so Spark aggregates with a hash map (a string or
struct buffer would make it sort every row first).

Sums modulo 2^64 are kept exactly as two BIGINT sums of 32-bit halves (ANSI mode raises on
BIGINT overflow; a half-sum cannot overflow below 2^31 batches) and folded by :func:`fold`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import Spec

#: A window holds the batches whose base offset is in ``[w * 2^16, (w + 1) * 2^16)``.
WINDOW_BITS = 16
SEED = 0x5EED  # the second hash: xxHash64 of the same values after this one

LOW = 0xFFFFFFFF

#: The summed columns (each a BIGINT sum) and what :func:`fold` turns them into.
DIGEST_SUMS = ("d1_lo", "d1_hi", "d2_lo", "d2_hi")
CHAIN_SUMS = ("c1_lo", "c1_hi", "c2_lo", "c2_hi")


def window_of(base: Column) -> Column:
    """The window of a batch with base offset ``base``."""
    return F.shiftright(base, WINDOW_BITS)


def window_start(win: Column) -> Column:
    """The first offset of window ``win`` (the inverse of :func:`window_of`)."""
    return F.shiftleft(win, WINDOW_BITS)


def _lo(h: Column) -> Column:
    return h.bitwiseAND(lit(LOW))


def _hi(h: Column) -> Column:
    return F.shiftrightunsigned(h, 32)


def _g1(x: Column) -> Column:
    return F.xxhash64(x)


def _g2(x: Column) -> Column:
    return F.xxhash64(lit(SEED), x)


def batch_terms(base: Column, last: Column, epoch: Column, crc: Column) -> dict[str, Column]:
    """Per batch, the value each of :data:`DIGEST_SUMS` and :data:`CHAIN_SUMS` adds."""
    d1 = F.xxhash64(base, last, epoch, crc)
    d2 = F.xxhash64(lit(SEED), base, last, epoch, crc)
    after = last + 1
    return {
        "d1_lo": _lo(d1), "d1_hi": _hi(d1), "d2_lo": _lo(d2), "d2_hi": _hi(d2),
        "c1_lo": _lo(_g1(base)) - _lo(_g1(after)), "c1_hi": _hi(_g1(base)) - _hi(_g1(after)),
        "c2_lo": _lo(_g2(base)) - _lo(_g2(after)), "c2_hi": _hi(_g2(base)) - _hi(_g2(after)),
    }


def summary_spec(base: Column, last: Column, epoch: Column, crc: Column, records: Column,
                 is_valid: Column, when: Column | None = None) -> list[Spec]:
    """The aggregates of one summary row over the batches of a group (rows where ``when``
    is false, or null, add nothing): ``n, records, min_base, max_base, max_last, crcless,
    invalid`` and the sums of :data:`DIGEST_SUMS` and :data:`CHAIN_SUMS`."""
    def only(c: Column) -> Column:
        return c if when is None else F.when(when, c)

    terms = batch_terms(base, last, epoch, crc)
    return [
        ("n", F.sum, only(lit(1))),
        ("records", F.sum, only(records)),
        ("min_base", F.min, only(base)),
        ("max_base", F.max, only(base)),
        ("max_last", F.max, only(last)),
        ("crcless", F.sum, only(F.when(crc.isNull(), 1).otherwise(0))),
        ("invalid", F.sum, only(F.when(is_valid == lit(False), 1).otherwise(0))),
        *[(k, F.sum, only(v)) for k, v in terms.items()],
    ]


def summary_aggregates(base: Column, last: Column, epoch: Column, crc: Column, records: Column,
                       is_valid: Column, when: Column | None = None) -> list[Column]:
    """:func:`summary_spec` as aggregate columns over the expressions themselves."""
    return [fn(expr).alias(name) for name, fn, expr in summary_spec(base, last, epoch, crc, records, is_valid, when)]


#: How the columns of summary rows (of :func:`summary_aggregates`) combine into coarser ones.
COMBINE: dict[str, Callable[[Column], Column]] = {
    "n": F.sum, "records": F.sum, "min_base": F.min, "max_base": F.max, "max_last": F.max,
    "crcless": F.sum, "invalid": F.sum, **{k: F.sum for k in (*DIGEST_SUMS, *CHAIN_SUMS)},
}


def rollup(keys: list[str]) -> list[Column]:
    """Aggregates that combine summary rows (of :func:`summary_aggregates`) into coarser ones."""
    return [fn(col(c)).alias(c) for c, fn in COMBINE.items()]


def fold(hi: Column, lo: Column) -> Column:
    """``hi * 2^32 + lo`` modulo 2^64 as a BIGINT (its bit pattern), from exact sums."""
    low = lo.bitwiseAND(lit(LOW))  # two's complement: lo modulo 2^32
    high = (hi + F.shiftright(lo, 32)).bitwiseAND(lit(LOW))  # the arithmetic shift floors
    return F.shiftleft(high, 32).bitwiseOR(low)


def digest(prefix: str = "d") -> tuple[Column, Column]:
    """The two folded digests of a summary row."""
    return (fold(col(f"{prefix}1_hi"), col(f"{prefix}1_lo")), fold(col(f"{prefix}2_hi"), col(f"{prefix}2_lo")))


def is_chain() -> Column:
    """The batches of a summary row tile ``[min_base, max_last]`` with no gap, overlap or
    repeated batch (both chain hashes agree)."""
    a, b = col("min_base"), col("max_last") + 1
    e1 = fold(_hi(_g1(a)) - _hi(_g1(b)), _lo(_g1(a)) - _lo(_g1(b)))
    e2 = fold(_hi(_g2(a)) - _hi(_g2(b)), _lo(_g2(a)) - _lo(_g2(b)))
    c1, c2 = digest("c")
    return (col("n") > 0) & (c1 == e1) & (c2 == e2)
