"""Helpers the tests share: the schedules harness plugin, action modules, worker scripts."""
