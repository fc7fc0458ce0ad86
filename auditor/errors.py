"""The auditor's error hierarchy: every expected failure maps to exit status 2."""

from __future__ import annotations


class AuditorError(Exception):
    """Base class of every error the CLI reports as a one-line message (exit status 2)."""

    exit_code = 2


class UsageError(AuditorError):
    """The command line or its combination of options is invalid."""


class ConfigError(AuditorError):
    """The TOML configuration file is missing, malformed or holds unknown keys or values."""


class InputError(AuditorError):
    """The input directory is missing, unreadable, or does not have the snapshot layout."""


class OutputError(AuditorError):
    """The output location cannot be written."""


class InconsistentResultError(AuditorError):
    """A computed table read back differently than it was written (exit 2; re-run)."""


class Stopped(SystemExit):
    """The run was stopped by a signal (SIGTERM from a scheduler, SIGINT from a terminal).

    A ``SystemExit``, so it unwinds everything (the landing undoes its writes) without being
    taken for an error of the audit; the CLI records the run as FAILED and exits 2.
    """

    def __init__(self, signame: str) -> None:
        super().__init__(2)
        self.signame = signame

    def __str__(self) -> str:
        return f"stopped by {self.signame}"


#: Set on the exception that ended a run once its FAILED ``runs`` row is written: whoever
#: catches it later records nothing more (SPEC 7: one FAILED row per attempt).
RECORDED = "auditor_failure_recorded"


def failure_recorded(exc: BaseException) -> bool:
    """True when the run ``exc`` ended has already recorded its end."""
    return bool(getattr(exc, RECORDED, False))


def mark_recorded(exc: BaseException) -> None:
    """Note on ``exc`` that its run's end is recorded."""
    try:
        setattr(exc, RECORDED, True)
    except (AttributeError, TypeError):  # an exception type without attributes: nothing to note
        pass


def failure_text(exc: BaseException) -> str:
    """What a FAILED row says of ``exc``: our own errors' messages (they never quote input
    lines), the signal that stopped the run, or else only the error's type, since an
    engine's message may quote a value."""
    if isinstance(exc, KeyboardInterrupt):
        return "stopped by SIGINT"
    if isinstance(exc, (AuditorError, Stopped)) and str(exc).strip():
        return str(exc).strip().splitlines()[0][:300]
    return f"{type(exc).__name__} (the audit's own output has the details)"
