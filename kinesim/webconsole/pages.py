"""The console's page and its static files. Every console URL gets the same page; its scripts
pick what to draw from the path. Nothing is fetched from another site (no CDN): the page works
offline, and its Content-Security-Policy lets it load only from this server and never be framed."""
from __future__ import annotations

import os

from flask import Flask, Response, abort, send_from_directory

STATIC = os.path.join(os.path.dirname(__file__), "static")
PREFIX = "/_kinesim/console"

# What a page of the console may do: scripts, styles and fetches from this server only; never
# shown inside another site's frame (clickjacking through the action buttons).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def add_routes(app: Flask) -> None:
    @app.get(PREFIX)
    @app.get(PREFIX + "/")
    @app.get(PREFIX + "/<path:page>")
    def console_page(page: str = "") -> Response:
        if page.startswith("api/"):
            abort(404)
        if page.startswith("static/"):
            response = send_from_directory(STATIC, page[len("static/"):], max_age=0)
        else:
            response = send_from_directory(STATIC, "index.html", max_age=0)
        response.headers.update(SECURITY_HEADERS)
        return response
