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
