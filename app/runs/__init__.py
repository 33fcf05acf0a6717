"""Workflows, activations and runs (layer 3)."""
