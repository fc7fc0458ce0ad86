"""No key, value or header content of a dump reaches any output (SPEC and the README's
promise): a token is planted in every payload position of every dump era, and a real
audit that also hits parse errors is searched end to end: every value of every table,
every other file under OUT, the HTML report, ``auditor explain`` of every partition, stdout
and stderr (``--verbose``: Spark's
and our own log lines included)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from auditor.ingest import dump_grammar
from auditor.ingest.dump_grammar import _CONTENT_GUARDS, _CONTENT_WORDS
from auditor.sinks.schemas import OUTPUT_TABLES
from tests.conftest import DUMPS, checkpoint, write
from tests.test_dump_formats import CASES

pytestmark = pytest.mark.spark

TOKEN = "TOKEN-{n}-x9Q"
_VALUE_WORDS = "|".join(re.escape(w.rstrip(":")) for w in _CONTENT_WORDS if w.endswith(":"))
# a content field and its value, up to the next content field or the end of the line
_FIELD = re.compile(rf"(?<!\S)({_VALUE_WORDS}): ?(.*?)(?=\s(?:{_VALUE_WORDS}): |$)")
# record and message lines that print no content: --print-data-log would add it at the end
_DATA_LINE = re.compile(r"^(\|\s*offset: |offset: \d+ position: \d+ .*(payloadsize|keysize|keySize): )")


class Planter:
    """Replaces every content value of a dump with a numbered token, and adds content to the
    record and message lines that printed none."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def token(self) -> str:
        self.tokens.append(TOKEN.format(n=len(self.tokens)))
        return self.tokens[-1]

    def _value(self, match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "headerKeys":
            return f"headerKeys: [{self.token()},{self.token()}]"
        return f"{name}: {self.token()} {self.token()}"  # two words: a value with spaces

    def line(self, text: str) -> list[str]:
        planted = _FIELD.sub(self._value, text)
        if planted == text and _DATA_LINE.match(text):
            planted = f"{text} headerKeys: [{self.token()}] key: {self.token()} payload: {self.token()}"
        out = [planted]
        if planted != text:  # a payload continued on the next physical line
            out.append(f"{self.token()} continued {self.token()}")
        return out


def _planted_snapshot(root: Path) -> tuple[Path, list[str]]:
    planter = Planter()
    for name, (folder, _, _) in CASES.items():
        lines = (DUMPS / name).read_text(encoding="utf-8").splitlines()
        text = "\n".join(out for line in lines for out in planter.line(line)) + "\n"
        write(root / "broker=1" / "data" / folder / "00000000000000000000.log.txt", text)
    # lines the grammar does not know, holding tokens: quarantined (parse errors)
    write(root / "broker=1" / "data" / "badlines-0" / "00000000000000000099.log.txt",
          f"Dumping /var/lib/kafka/data/badlines-0/00000000000000000099.log\n{planter.token()} = {planter.token()}\n"
          f"baseOffset: 99 lastOffset: 98 crc: 1 {planter.token()}\n")
    write(root / "broker=1" / "data" / "replication-offset-checkpoint",
          checkpoint([(f.rsplit("-", 1)[0], 0, 1) for f, _, _ in CASES.values()]))
    return root, planter.tokens


def test_no_planted_token_reaches_any_output(tmp_path: Path) -> None:
    snap, tokens = _planted_snapshot(tmp_path / "snap")
    planted = "\n".join((p.read_text()) for p in snap.rglob("*.log.txt"))
    # every era's file that prints records or messages holds tokens (shallow batch-only
    # dumps have no payload position), and so do continuations and bad lines
    for name, (folder, _, _) in CASES.items():
        original = (DUMPS / name).read_text(encoding="utf-8").splitlines()
        if any(_DATA_LINE.match(line) or _FIELD.search(line) for line in original):
            assert "TOKEN-" in (snap / "broker=1" / "data" / folder / "00000000000000000000.log.txt").read_text(), name
    assert len(tokens) > 100 and all(t in planted for t in tokens)
    out, report = tmp_path / "out", tmp_path / "report.html"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("auditor")), "audit", str(snap), "--out", str(out), "--cluster", "s",
         "--fail-on", "never", "--report", str(report), "--verbose"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    texts = {"stdout": done.stdout, "stderr": done.stderr, "report": report.read_text()}
    for name in OUTPUT_TABLES:
        table = DeltaTable(str(out / name)).to_pyarrow_table()
        texts[f"table {name}"] = "\n".join(str(v) for column in table.columns for v in column.to_pylist())
    for path in out.rglob("*"):
        if path.is_file() and path.suffix != ".parquet":  # Parquet is compressed: read above as tables
            texts[str(path)] = path.read_bytes().decode("utf-8", "replace")
    from auditor.explain import explain

    for part in DeltaTable(str(out / "partition_status")).to_pyarrow_table().to_pylist():
        buf = io.StringIO()
        explain(str(out), part["topic"], part["partition"], file=buf)
        texts[f"explain {part['topic']}-{part['partition']}"] = buf.getvalue()
    leaks = {where: sorted(set(re.findall(r"TOKEN-\d+-x9Q", text))) for where, text in texts.items()}
    assert {k: v for k, v in leaks.items() if v} == {}
    # the run really hit parse errors and read the planted files
    errors = DeltaTable(str(out / "parse_errors")).to_pyarrow_table().to_pylist()
    assert len(errors) >= 3 and any("unrecognised line" in e["error"] for e in errors)
    assert "TOKEN" not in " ".join(texts.values())


def test_every_content_word_holds_a_guard() -> None:
    """The substring searches that spare most lines the payload cut's regular expression
    must find every word the cut cuts at: a line holding none of them is never cut."""
    assert all(any(g in w for g in _CONTENT_GUARDS) for w in _CONTENT_WORDS)


def test_the_guarded_cut_cuts_as_the_regular_expression(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    batch = ("baseOffset: 0 lastOffset: 2 count: 3 partitionLeaderEpoch: 5 isControl: false "
             "deleteHorizonMs: OptionalLong.empty CreateTime: 1 crc: 7 isvalid: true")
    lines = [batch, f"{batch} key: a payload: b", f"| offset: 3 headerKeys: [] key: {TOKEN}",
             "| offset: 4 endTxnMarker: COMMIT coordinatorEpoch: 0", "| offset: 5 controlType: ABORT(0)",
             "| offset: 6 LeaderChange: {x}", "| offset: 7 SnapshotHeader {x}", "| offset: 8 KRaftVoters {x}",
             "offset: 9 position: 0 keysize: 1 valuesize: 1 payloadsize: 1 payload: z", "Type: no cut", ""]
    df = spark.createDataFrame([(x,) for x in lines], "t string")
    got = df.select(dump_grammar.metadata_part(F.col("t")).alias("m"),
                    F.regexp_replace("t", dump_grammar._CONTENT_CUT, "").alias("want")).collect()
    assert [r.m for r in got] == [r.want for r in got]
    assert got[0].m == batch and got[1].m == batch and TOKEN not in got[2].m
