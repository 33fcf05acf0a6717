"""Runs routes of SPEC §7."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("api_runs", __name__)
