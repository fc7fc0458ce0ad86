"""Comparing replicas on their summaries, and reading batches only where that is not enough."""
