"""Every response body leaves with sealed secrets replaced by `***` (API JSON and console HTML).

Doing it once here, instead of in every view and template, means a new page or field cannot
forget to hide a secret input.
"""

from __future__ import annotations

from flask import Flask, Response

from app.runs import secrets

_PREFIX = secrets.PREFIX.encode()


def init_app(app: Flask) -> None:
    @app.after_request
    def _mask(response: Response) -> Response:
        if response.direct_passthrough or response.is_streamed:
            return response
        body = response.get_data()
        if _PREFIX in body:
            response.set_data(secrets.mask_text(body.decode("utf-8")).encode("utf-8"))
        return response
