"""Damage a snapshot the way real inputs are damaged, and check what an audit must still
guarantee (shared by ``tests/test_fuzz.py`` and ``benchmarks/fuzz.py``).

A :class:`Mutation` changes one file of a copied snapshot (or the tree around it) and says
which partitions it may legitimately affect. :func:`check_invariants` then holds an audit
of the damaged copy to SPEC 8 and the README:

- every file's lines (split as Spark splits them: ``\\n``, ``\\r\\n`` or ``\\r``) are read,
  and lines read = parsed + skipped + quarantined;
- every quarantined line is a ``parse_errors`` row with its file, line number and reason,
  and a file that cannot be read (or is not a regular file) is a ``parse_errors`` row;
- partitions whose files were not touched get exactly the findings they got undamaged.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LONG_LINE_BYTES = 10 << 20

BROKER_FILES = ("replication-offset-checkpoint", "log-start-offset-checkpoint",
                "recovery-point-offset-checkpoint")


@dataclass(frozen=True)
class Target:
    """A file of the base snapshot that can be damaged."""

    rel: str
    kind: str  # dump | leader-epoch | broker-checkpoint | describe
    broker: int | None
    partition: tuple[str, int] | None  # the partition folder it sits in


def targets(root: Path) -> list[Target]:
    """Every input file of a simulated snapshot, classified."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        broker = next((int(p.split("=", 1)[1]) for p in path.parts if p.startswith("broker=")), None)
        folder = path.parent.name
        m = re.fullmatch(r"(.+)-(\d+)", folder)
        partition = (m.group(1), int(m.group(2))) if m and broker is not None else None
        if path.name.endswith(".log.txt"):
            found.append(Target(rel, "dump", broker, partition))
        elif path.name == "leader-epoch-checkpoint":
            found.append(Target(rel, "leader-epoch", broker, partition))
        elif path.name in BROKER_FILES:
            found.append(Target(rel, "broker-checkpoint", broker, None))
        elif path.name == "topics-describe.txt":
            found.append(Target(rel, "describe", None, None))
    return found


# --- byte-level mutations: bytes in, bytes out ------------------------------------------


def _lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def bit_flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


def cut_mid_field(data: bytes, rng: random.Random) -> bytes:
    """The file ends inside a line (a dump cut off by a timeout, a half-written checkpoint)."""
    lines = _lines_of(data)
    if not lines:
        return data
    i = rng.randrange(len(lines))
    cut = rng.randrange(1, max(2, len(lines[i])))
    return b"".join(lines[:i]) + lines[i][:cut]


def nul_bytes(data: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + b"\x00" * rng.randint(1, 64) + data[i:]


def non_utf8(data: bytes, rng: random.Random) -> bytes:
    buf = data
    for _ in range(rng.randint(1, 5)):
        i = rng.randrange(len(buf) + 1)
        buf = buf[:i] + rng.choice([b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xed\xa0\x80"]) + buf[i:]
    return buf


def binary_garbage(data: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(data) + 1)
    j = min(len(data), i + rng.randint(0, 4096))
    return data[:i] + rng.randbytes(rng.randint(1, 4096)) + data[j:]


def long_line(data: bytes, rng: random.Random, size: int = LONG_LINE_BYTES) -> bytes:
    """One line of ``size`` bytes (a payload printed without a newline)."""
    lines = _lines_of(data)
    i = rng.randrange(len(lines) + 1)
    line = b"| offset: 1 payload: " + b"x" * size + b"\n"
    return b"".join(lines[:i]) + line + b"".join(lines[i:])


def zero_length(data: bytes, rng: random.Random) -> bytes:
    return b""


def blank_only(data: bytes, rng: random.Random) -> bytes:
    return b"\n" * rng.randint(1, 5)


def crlf(data: bytes, rng: random.Random) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def lone_cr(data: bytes, rng: random.Random) -> bytes:
    return data.replace(b"\n", b"\r")


def duplicated_header(data: bytes, rng: random.Random) -> bytes:
    """The first line twice (a ``Dumping`` header, or a checkpoint's version line)."""
    lines = _lines_of(data)
    return b"".join(lines[:1] + lines) if lines else data


def lying_count(data: bytes, rng: random.Random) -> bytes:
    """A checkpoint whose entry count (second line) is not the number of entries."""
    lines = _lines_of(data)
    if len(lines) < 2:
        return data
    try:
        n = int(lines[1].strip())
    except ValueError:
        return data
    lines[1] = str(n + rng.choice([-2, -1, 1, 3, 1000])).encode() + b"\n"
    return b"".join(lines)


def other_partition_header(data: bytes, rng: random.Random, other: str = "") -> bytes:
    """A ``Dumping`` header naming another partition's folder."""
    return re.sub(rb"(?m)^Dumping (.*)/[^/]+-\d+/", lambda m: b"Dumping " + m.group(1) + b"/" + other.encode() + b"/",
                  data, count=1)


ByteMutation = Callable[[bytes, random.Random], bytes]

BYTE_MUTATIONS: dict[str, ByteMutation] = {
    "bit-flip": bit_flip, "cut-mid-field": cut_mid_field, "nul-bytes": nul_bytes, "non-utf8": non_utf8,
    "binary-garbage": binary_garbage, "long-line": long_line, "zero-length": zero_length,
    "blank-only": blank_only, "crlf": crlf, "lone-cr": lone_cr, "duplicated-header": duplicated_header,
    "lying-count": lying_count, "other-partition-header": other_partition_header,
}
#: Tree mutations: the file is replaced by something a reader cannot read as text.
TREE_MUTATIONS = ("unreadable", "dangling-symlink", "fifo", "symlink-loop")
KINDS = (*BYTE_MUTATIONS, *TREE_MUTATIONS)
ONLY_FOR = {"lying-count": ("leader-epoch", "broker-checkpoint"), "other-partition-header": ("dump",),
            "symlink-loop": ("dump",)}


@dataclass
class Applied:
    """What was done to one snapshot copy."""

    mutations: list[tuple[str, str]] = field(default_factory=list)  # (kind, rel)
    touched: set[tuple[str, int]] = field(default_factory=set)  # partitions that may change
    all_touched: bool = False  # a file every partition depends on was damaged
    unreadable: set[str] = field(default_factory=set)  # rels that must be parse_errors rows


def applicable(kind: str, target: Target) -> bool:
    return target.kind in ONLY_FOR.get(kind, (target.kind,))


def mutate(root: Path, target: Target, kind: str, rng: random.Random, applied: Applied,
           partitions: list[tuple[str, int]], long_line_bytes: int = LONG_LINE_BYTES) -> None:
    """Apply mutation ``kind`` to ``target`` in the snapshot copy at ``root``."""
    path = root / target.rel
    applied.mutations.append((kind, target.rel))
    if kind == "symlink-loop":  # the file itself stays as it was: nothing may change
        pass
    elif target.kind == "describe":
        applied.all_touched = True
    elif target.kind == "broker-checkpoint":
        applied.touched.update(p for p in partitions)  # every partition may have a replica there
    elif target.partition is not None:
        applied.touched.add(target.partition)
    if kind == "unreadable":
        path.chmod(0)
        if os.geteuid() != 0:  # root reads it anyway: then it is read as it is
            applied.unreadable.add(target.rel)
    elif kind == "dangling-symlink":
        path.unlink()
        path.symlink_to(path.with_name("no-such-file"))
        applied.unreadable.add(target.rel)
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
        applied.unreadable.add(target.rel)
    elif kind == "symlink-loop":  # a link in the log dir back to its broker folder
        link = path.parent.parent / "loop"
        if not link.exists():
            link.symlink_to(path.parent.parent.parent, target_is_directory=True)
    elif kind == "other-partition-header":
        others = [p for p in partitions if p != target.partition]
        other = rng.choice(others) if others else ("elsewhere", 0)
        path.write_bytes(other_partition_header(path.read_bytes(), rng, f"{other[0]}-{other[1]}"))
    elif kind == "long-line":
        path.write_bytes(long_line(path.read_bytes(), rng, long_line_bytes))
    else:
        path.write_bytes(BYTE_MUTATIONS[kind](path.read_bytes(), rng))


def copy_snapshot(base: Path, dest: Path) -> Path:
    if dest.exists():
        restore_permissions(dest)
        shutil.rmtree(dest)
    shutil.copytree(base, dest, symlinks=True)
    return dest


def restore_permissions(root: Path) -> None:
    """Make every damaged file removable again."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(stat.S_IRUSR | stat.S_IWUSR)


def spark_lines(data: bytes) -> int:
    """Lines of ``data`` as Spark's text reader splits them (a final terminator does not
    start an empty line)."""
    if not data:
        return 0
    return len(re.split(rb"\r\n|\r|\n", re.sub(rb"(\r\n|\r|\n)\Z", b"", data)))


def audit_damaged(spark: Any, root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Audit ``root`` with the Python API (SPEC 7): per-file accounting, parse_errors and
    findings, as rows (all small: per file, per bad line, per finding)."""
    from auditor import audit, load_snapshot

    # (planned by its size, as `auditor audit` plans it)
    snap = load_snapshot(spark, str(root))
    tables = audit(snap)
    accounting = snap.accounting.select("rel", "lines", "lines_parsed", "lines_skipped",
                                        "lines_quarantined").toArrow().to_pylist()
    errors = tables["parse_errors"].select("file", "line_number", "byte_offset", "error").toArrow().to_pylist()
    findings = tables["findings"].select("topic", "partition", "replica", "check", "severity", "offset_start",
                                         "offset_end", "epoch").toArrow().to_pylist()
    return accounting, errors, findings


FindingKey = tuple[Any, ...]


def finding_keys(rows: list[dict[str, Any]]) -> dict[tuple[str, int], set[FindingKey]]:
    """Findings per partition, by what they say (not by message wording or file names)."""
    out: dict[tuple[str, int], set[FindingKey]] = {}
    for r in rows:
        key = (r["replica"], r["check"], r["severity"], r["offset_start"], r["offset_end"], r["epoch"])
        out.setdefault((r["topic"], r["partition"]), set()).add(key)
    return out


def check_invariants(root: Path, applied: Applied, accounting: list[dict[str, Any]],
                     parse_errors: list[dict[str, Any]], findings: list[dict[str, Any]],
                     baseline: dict[tuple[str, int], set[FindingKey]]) -> list[str]:
    """Every broken promise, as one line each (empty: all hold)."""
    broken = []
    quarantined_rows: dict[str, int] = {}
    for e in parse_errors:
        if not e["file"] or not e["error"] or (e["line_number"] is None and e["byte_offset"] is None):
            broken.append(f"parse_errors row without file, position or reason: {e}")
        if e["line_number"] is not None:
            quarantined_rows[e["file"]] = quarantined_rows.get(e["file"], 0) + 1
    for a in accounting:
        rel = a["rel"]
        if a["lines"] != a["lines_parsed"] + a["lines_skipped"] + a["lines_quarantined"]:
            broken.append(f"{rel}: lines {a['lines']} != parsed + skipped + quarantined "
                          f"({a['lines_parsed']} + {a['lines_skipped']} + {a['lines_quarantined']})")
        path = root / rel
        if path.is_file() and os.access(path, os.R_OK):
            expected = spark_lines(path.read_bytes())
            if a["lines"] != expected:
                broken.append(f"{rel}: {a['lines']} lines counted, the file has {expected}")
        if quarantined_rows.get(rel, 0) != a["lines_quarantined"]:
            broken.append(f"{rel}: {a['lines_quarantined']} lines quarantined but "
                          f"{quarantined_rows.get(rel, 0)} parse_errors rows with a line number")
    with_errors = {e["file"] for e in parse_errors}
    for rel in sorted(applied.unreadable):
        if rel not in with_errors:
            broken.append(f"{rel}: cannot be read, but no parse_errors row says so")
    if not applied.all_touched:
        now = finding_keys(findings)
        for part in sorted(set(baseline) | set(now)):
            if part not in applied.touched and baseline.get(part, set()) != now.get(part, set()):
                broken.append(f"{part[0]}-{part[1]} was not touched, but its findings changed: "
                              f"{sorted(baseline.get(part, set()) ^ now.get(part, set()), key=str)[:4]}")
    return broken
