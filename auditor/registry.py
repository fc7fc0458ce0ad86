"""Every check the auditor can emit (docs/contract.md, "Checks"), and the choices of the
command line: severities, protocols, formats."""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES: tuple[str, ...] = ("CRITICAL", "ERROR", "WARNING", "INFO")

#: Rank used for ``--fail-on`` comparisons: a higher rank is more severe.
SEVERITY_RANK: dict[str, int] = {"INFO": 1, "WARNING": 2, "ERROR": 3, "CRITICAL": 4}

@dataclass(frozen=True)
class Check:
    """One check: what a finding of it is about and where its contract is written."""

    name: str
    severity: str  # the default; some checks have a second, context-dependent default
    scope: str  # replica | follower | partition | over-time: what one finding is about
    summary: str  # one line: what a finding of it means
    module: str  # where it is computed (under auditor.checks)

    @property
    def doc(self) -> str:
        """Where the check is defined for users: its row of docs/contract.md's checks."""
        return f"docs/contract.md#check-{self.name.lower().replace('_', '-')}"


#: Every check the auditor can emit, with its default severity, in the contract's order.
#: Some checks have a second, context-dependent default (``OFFSET_GAP`` is INFO on
#: compacted topics); the config's ``[severity]`` table replaces every default of a check.
REGISTRY: tuple[Check, ...] = (
    Check("OFFSET_GAP", "WARNING", "replica", "a batch starts after the previous one's end", "replica"),
    Check("OFFSET_OVERLAP", "ERROR", "replica", "a batch starts at or before the previous one's last offset", "replica"),
    Check("EPOCH_REGRESSION", "ERROR", "replica", "a batch's epoch is lower than an earlier batch's", "replica"),
    Check("CORRUPT_BATCH", "CRITICAL", "replica", "an invalid batch, or invalid bytes at a segment's end", "replica"),
    Check("HWM_ABOVE_LEO", "ERROR", "replica", "the HWM is past the log's end", "replica"),
    Check("EPOCH_CACHE_MISMATCH", "ERROR", "replica", "the epoch checkpoint disagrees with the log", "replica"),
    Check("MISSING_INPUT", "WARNING", "replica", "an input is missing or unusable: some checks were skipped", "replica"),
    Check("FOLLOWER_LAG", "INFO", "follower", "the follower agrees with the leader but lags behind", "pairs"),
    Check("DIVERGENT_SUFFIX", "WARNING", "follower", "truncation removes exactly the records that differ", "pairs"),
    Check("OVER_TRUNCATION", "WARNING", "follower", "truncation also removes records that match the leader's", "pairs"),
    Check("SILENT_DIVERGENCE", "CRITICAL", "follower", "after truncation the follower still holds other records",
          "pairs"),
    Check("SAME_EPOCH_CONFLICT", "CRITICAL", "follower", "two different batches at one offset in one epoch", "pairs"),
    Check("LOG_MATCHING_VIOLATION", "CRITICAL", "follower", "the replicas differ below what both consider committed",
          "pairs"),
    Check("COMMITTED_DATA_LOSS", "CRITICAL", "follower", "truncation deletes records the follower saw committed",
          "pairs"),
    Check("ISR_INCOMPLETE", "CRITICAL", "follower", "an ISR member lacks a committed batch of the leader's", "pairs"),
    Check("LEADER_INCOMPLETE", "CRITICAL", "partition", "the leader's log ends below some replica's HWM", "pairs"),
    Check("LEADER_UNKNOWN", "WARNING", "partition", "no leader is named and no replica has an epoch", "pairs"),
    Check("METADATA_CONFLICT", "WARNING", "partition", "the describe output lists the partition twice, differently",
          "pairs"),
    Check("HWM_REGRESSION", "CRITICAL", "over-time", "the same leader's HWM went down", "overtime"),
    Check("FOLLOWER_HWM_REGRESSION", "INFO", "over-time", "a follower's HWM went down", "overtime"),
    Check("STALE_LEADER_HWM", "WARNING", "over-time", "a new leader's HWM is below the highest seen", "overtime"),
    Check("COMMITTED_OFFSET_LOST", "CRITICAL", "over-time", "a committed offset is gone from the leader's log",
          "overtime"),
    Check("KRAFT_ELECTION_SAFETY", "CRITICAL", "partition", "two leaders named for one epoch", "kraft"),
    Check("KRAFT_EPOCH_START", "ERROR", "replica", "an epoch does not start with a LeaderChange batch", "kraft"),
    Check("KRAFT_SNAPSHOT_INVALID", "ERROR", "replica", "a metadata snapshot is empty or malformed", "kraft"),
    Check("KRAFT_SNAPSHOT_MISSING", "CRITICAL", "replica", "no snapshot reaches the node's log start", "kraft"),
    Check("KRAFT_QUORUM_STATE_BEHIND", "WARNING", "replica", "quorum-state's epoch is behind the log's", "kraft"),
    Check("KRAFT_VOTERS_DIFFER", "ERROR", "partition", "quorum-state files name different voters", "kraft"),
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
