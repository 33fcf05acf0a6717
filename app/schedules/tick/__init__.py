"""Firing: how occurrences become runs, for the tick, buffers, triggers and backfill.

`policy` decides (pure), `context` loads what decisions read, `act` applies the overlap policy to
one occurrence, `starts` starts the runs, `rows` is the tick's Core store, `due` and `buffers`
are the tick's two schedule phases.
"""
