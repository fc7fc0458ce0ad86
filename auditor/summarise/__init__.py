"""Summarising each replica's log per window of offsets and per epoch, in the scan that reads it."""
