"""The web console at /_kinesim/console/: pages that show the pipeline live (streams and their
shards, functions, mappings, delivery streams, buckets, queues, topics, logs, continuous queries)
and a few actions (put a record, split or merge shards, invoke, flush, stop or resume a query).

One page (`static/index.html`) serves every console URL; its scripts (`static/console.js`, the
shell, and one `static/pages/*.js` per kind of page) read JSON from `/_kinesim/console/api/...`.
Each area's module here answers its part of that API from the services' in-process state
(counters, buffers, checkpoints), never by calling the AWS APIs over HTTP; actions go through
the services' own `call`, so they are checked as the API checks them. See `http.py` for what keeps
other web sites out.

Each page and API call shows one account and region, `?account=&region=` (the server's own when
left out): `scope.py` picks the scope's services, which the areas use as they used the server's."""
from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Flask

from . import buckets, deliveries, functions, others, overview, pages, queries, scope, streams

if TYPE_CHECKING:
    from ..edge import Edge


def register(app: Flask, edge: "Edge") -> None:
    """Add the console's pages and API to kinesim's own Flask app."""
    pages.add_routes(app)
    for area in (scope, overview, streams, functions, deliveries, buckets, queries, others):
        area.add_routes(app, edge)
