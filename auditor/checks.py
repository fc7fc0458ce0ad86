"""Names and default severities of every check of SPEC section 5."""

from __future__ import annotations

SEVERITIES: tuple[str, ...] = ("CRITICAL", "ERROR", "WARNING", "INFO")

#: Rank used for ``--fail-on`` comparisons: a higher rank is more severe.
SEVERITY_RANK: dict[str, int] = {"INFO": 1, "WARNING": 2, "ERROR": 3, "CRITICAL": 4}

#: Every check the auditor can emit, with its default severity. Some checks have a second,
#: context-dependent default (e.g. ``OFFSET_GAP`` is INFO on compacted topics); the config's
#: ``[severity]`` table replaces every default of a check.
CHECKS: dict[str, str] = {
    "OFFSET_GAP": "WARNING",
    "OFFSET_OVERLAP": "ERROR",
    "EPOCH_REGRESSION": "ERROR",
    "CORRUPT_BATCH": "CRITICAL",
    "HWM_ABOVE_LEO": "ERROR",
    "EPOCH_CACHE_MISMATCH": "ERROR",
    "MISSING_INPUT": "WARNING",
    "FOLLOWER_LAG": "INFO",
    "DIVERGENT_SUFFIX": "WARNING",
    "OVER_TRUNCATION": "WARNING",
    "SILENT_DIVERGENCE": "CRITICAL",
    "SAME_EPOCH_CONFLICT": "CRITICAL",
    "LOG_MATCHING_VIOLATION": "CRITICAL",
    "COMMITTED_DATA_LOSS": "CRITICAL",
    "ISR_INCOMPLETE": "CRITICAL",
    "LEADER_INCOMPLETE": "CRITICAL",
    "LEADER_UNKNOWN": "WARNING",
    "HWM_REGRESSION": "CRITICAL",
    "FOLLOWER_HWM_REGRESSION": "INFO",
    "STALE_LEADER_HWM": "WARNING",
    "COMMITTED_OFFSET_LOST": "CRITICAL",
}

FAIL_ON_CHOICES: tuple[str, ...] = ("critical", "error", "warning", "info", "never")
PROTOCOLS: tuple[str, ...] = ("epoch", "kip-101", "hwm", "raft")
FORMATS: tuple[str, ...] = ("kafka", "table")

#: Default protocol per input format (SPEC 4.3).
DEFAULT_PROTOCOL: dict[str, str] = {"kafka": "epoch", "table": "raft"}

#: Topics that are always compacted (SPEC 4.5).
ALWAYS_COMPACTED: tuple[str, ...] = ("__consumer_offsets", "__transaction_state")

#: A total order of one replica's batches: by offsets and epoch, then by CRC, then by the
#: file and line that printed the batch, so windows never depend on how rows arrive.
BATCH_ORDER = ("base_offset", "last_offset", "epoch", "crc", "file", "line_number")
