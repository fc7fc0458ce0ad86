"""Names and default severities of every check of SPEC section 5."""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES: tuple[str, ...] = ("CRITICAL", "ERROR", "WARNING", "INFO")

#: Rank used for ``--fail-on`` comparisons: a higher rank is more severe.
SEVERITY_RANK: dict[str, int] = {"INFO": 1, "WARNING": 2, "ERROR": 3, "CRITICAL": 4}

@dataclass(frozen=True)
class Check:
    """One check of SPEC section 5."""

    name: str
    severity: str  # the default; some checks have a second, context-dependent default
    scope: str  # replica | follower | partition | over-time: what one finding is about
    spec: str  # where SPEC defines it
    module: str  # where it is computed (under auditor.checks)


#: Every check the auditor can emit, with its default severity, in SPEC order. Some checks
#: have a second, context-dependent default (e.g. ``OFFSET_GAP`` is INFO on compacted
#: topics); the config's ``[severity]`` table replaces every default of a check.
REGISTRY: tuple[Check, ...] = (
    Check("OFFSET_GAP", "WARNING", "replica", "5, per replica", "replica"),
    Check("OFFSET_OVERLAP", "ERROR", "replica", "5, per replica", "replica"),
    Check("EPOCH_REGRESSION", "ERROR", "replica", "5, per replica", "replica"),
    Check("CORRUPT_BATCH", "CRITICAL", "replica", "5, per replica; 3.1", "replica"),
    Check("HWM_ABOVE_LEO", "ERROR", "replica", "5, per replica", "replica"),
    Check("EPOCH_CACHE_MISMATCH", "ERROR", "replica", "5, per replica; 4.1", "replica"),
    Check("MISSING_INPUT", "WARNING", "replica", "5, per replica and per partition; 4.6", "replica"),
    Check("FOLLOWER_LAG", "INFO", "follower", "5, leader against each follower", "pairs"),
    Check("DIVERGENT_SUFFIX", "WARNING", "follower", "5, leader against each follower", "pairs"),
    Check("OVER_TRUNCATION", "WARNING", "follower", "5, leader against each follower", "pairs"),
    Check("SILENT_DIVERGENCE", "CRITICAL", "follower", "5, leader against each follower", "pairs"),
    Check("SAME_EPOCH_CONFLICT", "CRITICAL", "follower", "5, leader against each follower", "pairs"),
    Check("LOG_MATCHING_VIOLATION", "CRITICAL", "follower", "5, leader against each follower", "pairs"),
    Check("COMMITTED_DATA_LOSS", "CRITICAL", "follower", "5, leader against each follower", "pairs"),
    Check("ISR_INCOMPLETE", "CRITICAL", "follower", "5, leader against each follower", "pairs"),
    Check("LEADER_INCOMPLETE", "CRITICAL", "partition", "5, per partition", "pairs"),
    Check("LEADER_UNKNOWN", "WARNING", "partition", "5, per partition; 4.6", "pairs"),
    Check("METADATA_CONFLICT", "WARNING", "partition", "5, per partition; 3.1", "pairs"),
    Check("HWM_REGRESSION", "CRITICAL", "over-time", "5, over time", "overtime"),
    Check("FOLLOWER_HWM_REGRESSION", "INFO", "over-time", "5, over time", "overtime"),
    Check("STALE_LEADER_HWM", "WARNING", "over-time", "5, over time", "overtime"),
    Check("COMMITTED_OFFSET_LOST", "CRITICAL", "over-time", "5, over time", "overtime"),
    Check("KRAFT_ELECTION_SAFETY", "CRITICAL", "partition", "4.7", "kraft"),
    Check("KRAFT_EPOCH_START", "ERROR", "replica", "4.7", "kraft"),
    Check("KRAFT_SNAPSHOT_INVALID", "ERROR", "replica", "4.7", "kraft"),
    Check("KRAFT_SNAPSHOT_MISSING", "CRITICAL", "replica", "4.7", "kraft"),
    Check("KRAFT_QUORUM_STATE_BEHIND", "WARNING", "replica", "4.7", "kraft"),
    Check("KRAFT_VOTERS_DIFFER", "ERROR", "partition", "4.7", "kraft"),
)

#: name -> default severity (what ``[severity]`` in the config may replace).
CHECKS: dict[str, str] = {c.name: c.severity for c in REGISTRY}

FAIL_ON_CHOICES: tuple[str, ...] = ("critical", "error", "warning", "info", "never")
PROTOCOLS: tuple[str, ...] = ("epoch", "kip-101", "hwm", "raft")
FORMATS: tuple[str, ...] = ("kafka", "table", "etcd")

#: Default protocol per input format (SPEC 4.3).
DEFAULT_PROTOCOL: dict[str, str] = {"kafka": "epoch", "table": "raft", "etcd": "raft"}

#: Topics that are always compacted (SPEC 4.5).
ALWAYS_COMPACTED: tuple[str, ...] = ("__consumer_offsets", "__transaction_state")
