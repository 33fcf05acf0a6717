"""A Flask app whose one endpoint does nothing: `save_bench.py` serves it with the same
gunicorn settings and client as Almanac, so a save rate can be read against what this machine's
web stack does at all (the ceiling moves with the machine; the share of it moves with the code).
"""

from flask import Flask

app = Flask(__name__)


@app.post("/")
@app.post("/api/v1/schedules")
def nothing() -> tuple[str, int]:
    return "{}", 201
