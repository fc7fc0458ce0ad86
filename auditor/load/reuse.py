"""An incremental run's input (``[run] incremental``): which dump files it reads from the
store under OUT (:mod:`auditor.sinks.store`) and which it parses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from pyspark.sql import DataFrame, SparkSession

from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.sinks import store as st
from auditor.sinks.store import Fingerprint
from auditor.summarise.scan import SCAN_COLUMNS


def file_fingerprints(cluster: str, files: Iterable[d.InputFile]) -> dict[str, Fingerprint]:
    """The store's fingerprint of each of ``files`` (:func:`auditor.sinks.store.fingerprint`),
    by path."""
    return {f.path: st.fingerprint(cluster, f.broker if f.broker is not None else -1, f.rel, f.path) for f in files}


class Reuse:
    """Which dump files an incremental run reads from the store and which it parses."""

    def __init__(self, spark: SparkSession, store: tuple[str, str], dump_files: list[tuple[int, d.InputFile]],
                 fingerprints: Mapping[str, Fingerprint] | None = None):
        """``fingerprints``: the files' fingerprints by path, when the caller took them
        (:func:`file_fingerprints`); else they are taken here."""
        self.spark, (self.out, self.cluster) = spark, store
        if fingerprints is None:
            fingerprints = file_fingerprints(self.cluster, [f for _, f in dump_files])
        self.fingerprints = {i: fingerprints[f.path] for i, f in dump_files}
        have = st.known(self.out, self.cluster)
        self.reused = [(i, f) for i, f in dump_files if self.fingerprints[i].fp in have]
        self.to_parse = [(i, f) for i, f in dump_files if self.fingerprints[i].fp not in have]
        # who wrote the rows of each fingerprint this run uses (itself for what it parses)
        self.writers = {self.fingerprints[i].fp: have[self.fingerprints[i].fp] for i, _ in self.reused}
        self.used = sorted({self.fingerprints[i].fp for i, _ in dump_files})
        self.new = sorted({self.fingerprints[i] for i, _ in self.to_parse}, key=lambda fp: fp.fp)
        # One file per fingerprint gives the stored rows (the same file in two snapshot=
        # folders of one input has one fingerprint: its rows are kept once).
        first: dict[str, int] = {}
        for i, _ in self.to_parse:
            first.setdefault(self.fingerprints[i].fp, i)
        self.keepers = [(i, f) for i, f in self.to_parse if first[self.fingerprints[i].fp] == i]

    def rows(self, spill: str | None = None) -> DataFrame:
        """The stored scan rows of the reused files, with their file's id in this run
        (``spill``: the run's work dir, where a long list of them is stored)."""
        wanted = local_frame(self.spark, [(self.fingerprints[i].fp, self.writers[self.fingerprints[i].fp], i)
                                          for i, _ in self.reused], "fp string, writer string, file_id int",
                             spill=spill)
        return st.read_rows(self.spark, self.out, "store_scan", self.cluster, wanted).select(*SCAN_COLUMNS)

    def row_bound(self) -> int | None:
        """At most how many rows :meth:`rows` gives (every stored scan row of the cluster);
        None when the store cannot say."""
        return st.stored_row_count(self.out, "store_scan", self.cluster)

    def kraft_sections(self, files: AbstractSet[int]) -> dict[int, set[int]]:
        """File id -> sections of the reused ``files`` whose header names the metadata log,
        from the store's header rows (:func:`_kraft_sections`), read without Spark."""
        wanted: dict[tuple[str, str], list[int]] = {}
        for i, _ in self.reused:
            if i in files:
                fp = self.fingerprints[i].fp
                wanted.setdefault((fp, self.writers[fp]), []).append(i)
        if not wanted:
            return {}
        rows = st.header_rows(self.out, self.cluster, d.KRAFT_TOPICS, 0)
        found: dict[int, set[int]] = {}
        for fp, writer, sec in zip(*(rows.column(c).to_pylist() for c in ("fp", "writer", "sec"))):
            for file_id in wanted.get((fp, writer), []):
                found.setdefault(file_id, set()).add(sec)
        return found

    def new_rows(self, scan: DataFrame, spill: str | None = None) -> dict[str, DataFrame]:
        """What this run parsed, per file, shaped as the store keeps it."""
        fps = local_frame(self.spark, [(i, self.fingerprints[i].fp) for i, _ in self.keepers],
                          "file_id int, fp string", spill=spill)
        return {"store_scan": scan.join(fps, "file_id").select("fp", *[
            c for c in SCAN_COLUMNS if c != "file_id"])}
