"""Incremental handoff summaries of agent threads."""
