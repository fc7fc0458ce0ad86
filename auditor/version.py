"""The auditor's version (stored in every ``runs`` row's ``tool_version``)."""

from __future__ import annotations

__version__ = "0.1.0"
