"""Schedules (layer 3): lifecycle, revisions, firing decisions, the ledger and the audit stream."""
