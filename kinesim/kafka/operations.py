"""The Kafka APIs kinesim serves, by api key (the versions of each are codec.VERSIONS'). A
handler is a plain function, run in the listener's pool, or a coroutine function, run on its loop."""
from __future__ import annotations

from .handlers import fetch, metadata, offsets, produce, versions
from .handlers import producer_id
from .handlers import admin, configs

OPERATIONS = {
    0: produce.produce,
    1: fetch.fetch,          # async: it may wait for records on the loop
    2: offsets.list_offsets,
    18: versions.api_versions,
    3: metadata.metadata,
    60: metadata.describe_cluster,
    22: producer_id.init_producer_id,
    19: admin.create_topics,  # async, as are DeleteTopics, CreatePartitions and the alters: they wait for the stream
    20: admin.delete_topics,
    37: admin.create_partitions,
    32: configs.describe_configs,
    33: configs.alter_configs,
    44: configs.incremental_alter_configs,
}
