"""The tick loop (layer 4) and the APScheduler host that runs it."""
