"""A dump line's context, as the two readers of dump files give it
(:mod:`auditor.ingest.wholefile`, :mod:`auditor.ingest.largefile`): the columns of a read
line, its section's flags, and the line tests the owners of record lines need."""

from __future__ import annotations

from pyspark.sql import Column

from auditor import columns as F
from auditor.columns import lit
from auditor.ingest import dump_grammar as g

#: Columns of :func:`auditor.ingest.wholefile.read_dump_lines`.
LINE_COLUMNS = ("file_id", "line_number", "text", "sec", "in_log", "has_problem", "tail", "owner",
                "owner_needs_records", "known_prev", "file_has_legacy")
LINES_DDL = ("file_id int, line_number bigint, text string, sec int, in_log boolean, has_problem boolean, "
             "tail boolean, owner bigint, owner_needs_records boolean, known_prev boolean, file_has_legacy boolean")

# A line's section, as one number: its index, then flags.
IN_LOG, PROBLEM, TAIL = 1 << 32, 1 << 33, 1 << 34



def needs_records(batch_line: Column) -> Column:
    """A batch line whose record count (and, for a legacy batch, base offset) comes from the
    record lines under it: a legacy line, or a v2 line without a usable ``count:``."""
    t = g.stripped(batch_line)
    return ~t.startswith("baseOffset: ") | g.field_long(g.tokens(g.metadata_part(t)), "count").isNull()


def is_known_payload(t: Column, kind: Column) -> Column:
    """The ``known`` value of a stripped line of ``kind``: null for lines that do not count
    (unrecognised, blank), else whether it is a record line with a key or payload."""
    return F.when(~kind.isin("unknown", "blank"),
                  kind.isin(*g.RECORD_KINDS) & t.rlike(r"(^|\s)(key|payload): "))


def section_code(header: Column | None, topic: Column, partition: Column) -> Column:
    """A section's flags (:data:`IN_LOG`, :data:`PROBLEM`) from its header line (None: the
    lines before any header) and the file's folder ``topic``, ``partition``."""
    if header is None:
        return section_flags(lit(True), lit(None).cast("string"), lit(None), topic, partition)
    path = g.header_path(g.stripped(header))
    h_topic, h_part = g.header_topic_partition(path)
    return section_flags(g.section_kind(path) == "log", h_topic, h_part, topic, partition)


def section_flags(in_log: Column, h_topic: Column, h_partition: Column, topic: Column, partition: Column) -> Column:
    """:func:`section_code` from what a header says: whether its path is a ``.log`` file
    (true for the lines before any header), the partition its path names (nulls when
    none), and the file's folder ``topic, partition``."""
    conflict = g.header_conflict(h_topic, h_partition, topic, partition)
    problem = conflict | F.coalesce(h_topic, topic).isNull()
    return (F.when(in_log, lit(IN_LOG)).otherwise(lit(0)) + F.when(problem, lit(PROBLEM)).otherwise(lit(0))
            ).cast("bigint")


# --- the line tests used inside array functions (a cheap prefix test guards the exact one) ---

def is_header(x: Column) -> Column:
    return F.ltrim(x).startswith("Dumping ") & (g.line_kind(g.stripped(x)) == "header")


def is_v2_batch(x: Column) -> Column:
    return F.ltrim(x).startswith("baseOffset: ") & g.stripped(x).startswith("baseOffset: ")


def is_legacy_batch(x: Column) -> Column:
    return F.ltrim(x).startswith("offset: ") & (g.line_kind(g.stripped(x)) == "batch_legacy")


def is_record(x: Column) -> Column:
    """A superset of the other record lines (``| offset: ...``, an old deep dump's
    ``offset: N position: ...``): their batch is the batch line above them."""
    lead = F.ltrim(x)
    return lead.startswith("|") | lead.startswith("offset: ")


def may_carry_payload(x: Column) -> Column:
    """A superset of the record lines that print a key or payload (see :func:`is_known_payload`)."""
    lead = F.ltrim(x)
    record = lead.startswith("|") | lead.startswith("key: ") | lead.startswith("payload: ")
    return record & (x.contains("key: ") | x.contains("payload: "))
