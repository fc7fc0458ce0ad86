"""``kafka-dump-log.sh`` text in the style of a chosen Kafka release (KAFKA-FORMATS 1.3 to
1.5): the batch line of eras D to I and, optionally, the record lines of eras E to I."""

from __future__ import annotations

from dataclasses import dataclass

# release name -> era (KAFKA-FORMATS 1.4)
DUMP_STYLES = {"1.0": "D0", "2.1": "D", "2.2": "E", "2.8": "F", "3.0": "G", "3.2": "H", "3.3": "I"}
DEFAULT_STYLE = "3.3"


@dataclass(frozen=True)
class DumpStyle:
    """How one Kafka release prints a v2 batch (uncompressed, non-transactional)."""

    version: str = DEFAULT_STYLE

    def __post_init__(self) -> None:
        if self.version not in DUMP_STYLES:
            raise ValueError(f"unknown dump style {self.version!r}; one of {', '.join(DUMP_STYLES)}")

    @property
    def era(self) -> str:
        return DUMP_STYLES[self.version]

    @property
    def prints_records(self) -> bool:
        """Whether ``--deep-iteration`` keeps the batch line (2.2+; before, records replace it)."""
        return self.era not in ("D0", "D")

    def header(self, segment_base: int) -> str:
        label = "Log starting offset" if self.era == "I" else "Starting offset"
        return f"{label}: {segment_base}"

    def batch_line(self, base: int, last: int, epoch: int, crc: int, position: int, timestamp: int,
                   size: int, valid: bool) -> str:
        era, count = self.era, last - base + 1
        codec = "none" if era in ("G", "H", "I") else "NONE"
        head = f"baseOffset: {base} lastOffset: {last} "
        if era != "D0":
            head += f"count: {count} "
        head += ("baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
                 f"partitionLeaderEpoch: {epoch} isTransactional: false")
        if era != "D0":
            head += " isControl: false"
        if era in ("H", "I"):
            head += " deleteHorizonMs: OptionalLong.empty"
        v = str(valid).lower()
        if era in ("D0", "D"):
            return (f"{head} position: {position} CreateTime: {timestamp} isvalid: {v} size: {size} "
                    f"magic: 2 compresscodec: {codec} crc: {crc}")
        return (f"{head} position: {position} CreateTime: {timestamp} size: {size} magic: 2 "
                f"compresscodec: {codec} crc: {crc} isvalid: {v}")

    def record_line(self, offset: int, base: int, last: int, epoch: int, position: int, timestamp: int,
                    size: int) -> str:
        era = self.era
        if era == "E":
            return f"| offset: {offset} CreateTime: {timestamp} keysize: -1 valuesize: 8 sequence: -1 headerKeys: []"
        if era == "F":
            return (f"| offset: {offset} isValid: true crc: null keySize: -1 valueSize: 8 CreateTime: {timestamp} "
                    f"baseOffset: {base} lastOffset: {last} baseSequence: -1 lastSequence: -1 producerEpoch: -1 "
                    f"partitionLeaderEpoch: {epoch} batchSize: {size} magic: 2 compressType: NONE "
                    f"position: {position} sequence: -1 headerKeys: []")
        return f"| offset: {offset} CreateTime: {timestamp} keySize: -1 valueSize: 8 sequence: -1 headerKeys: []"
