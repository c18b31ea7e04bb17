"""The Kafka APIs kinesim serves, by api key (the versions of each are codec.VERSIONS'). A
handler is a plain function, run in the listener's pool, or a coroutine function, run on its loop."""
from __future__ import annotations

from .handlers import fetch, metadata, offsets, produce, versions

OPERATIONS = {
    0: produce.produce,
    1: fetch.fetch,          # async: it may wait for records on the loop
    2: offsets.list_offsets,
    18: versions.api_versions,
    3: metadata.metadata,
    60: metadata.describe_cluster,
}
