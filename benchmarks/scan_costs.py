"""Where the scan's time per line goes: the dump files of a snapshot read by successive
prefixes of the scan's work, each timed as a Spark job that writes nothing (``noop``).

    .venv/bin/python benchmarks/scan_costs.py SNAPSHOT [--repeat 2]

Steps (each includes the ones before it):

- ``read``: the binary file source, every file's length;
- ``lines``: files split into lines with their context (section, tail, owner), exploded
  (:func:`auditor.ingest.wholefile.read_dump_lines`);
- ``metadata cut``: each line stripped and cut before its first key or payload field;
- ``tokens``: the cut split at spaces;
- ``fields``: the five numbers and ``isvalid`` of a batch line read from its tokens;
- ``classified``: the whole grammar (:func:`auditor.ingest.dumps.classified_lines`);
- ``scan``: the scan's aggregate (:func:`auditor.summarise.scan.scan_dumps`).

The first round runs on a cold JVM; later rounds (``--repeat``) show the warm cost. One
JSON line per round.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from auditor.ingest import discovery as d
from auditor.ingest import dump_grammar as g
from auditor.ingest.dumps import classified_lines
from auditor.ingest.wholefile import read_dump_lines
from auditor.load.inputs import listed_files
from auditor.spark import build_session
from auditor.summarise.scan import scan_dumps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("snapshot")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = build_session(None, quiet=True)
    listed = listed_files(spark, d.discover(args.snapshot, datetime.now(timezone.utc), None))
    dumps, dump_frame = listed.dump_files, listed.dump_frame
    t = g.stripped(F.col("text"))
    toks = g.tokens(g.metadata_part(t))
    fields = [g.field_long(F.col("k"), n).alias(n) for n in ("baseOffset", "lastOffset", "count",
                                                             "partitionLeaderEpoch", "crc")]
    steps = {
        "read": lambda: spark.read.format("binaryFile").load([f.path for _, f in dumps]).select(F.length("content")),
        "lines": lambda: read_dump_lines(spark, dumps).select("line_number", "tail"),
        "metadata cut": lambda: read_dump_lines(spark, dumps).select(g.metadata_part(t).alias("m")),
        "tokens": lambda: read_dump_lines(spark, dumps).select(toks.alias("k")),
        "fields": lambda: read_dump_lines(spark, dumps).select(toks.alias("k")).select(
            *fields, g.field_bool(F.col("k"), "isvalid", "isValid").alias("v")),
        "classified": lambda: classified_lines(read_dump_lines(spark, dumps), dump_frame).select(
            "kind", "f_base", "disposition"),
        "scan": lambda: scan_dumps(spark, dumps, dump_frame),
    }

    def seconds(df: DataFrame) -> float:
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return round(time.perf_counter() - t0, 2)

    for round_ in range(args.repeat):
        print(json.dumps({"round": round_, "dump_files": len(dumps),
                          **{name: seconds(make()) for name, make in steps.items()}}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
