"""Schedules (layer 3): changes and revisions, firing, the ledger and the audit stream.

The module map is at the top of docs/schedules.md.
"""
