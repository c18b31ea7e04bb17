"""The Kafka APIs kinesim serves, by api key (the versions of each are codec.VERSIONS'). A
handler is a plain function, run in the listener's pool, or a coroutine function, run on its loop."""
from __future__ import annotations

from .handlers import fetch, metadata, offsets, produce, versions
from .handlers import producer_id
from .handlers import admin, configs
from .handlers import sasl
from .handlers import group_offsets, groups

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
    17: sasl.sasl_handshake,
    36: sasl.sasl_authenticate,
    10: groups.find_coordinator,  # the groups' handlers are async: the coordinator lives on the loop
    11: groups.join_group,
    14: groups.sync_group,
    12: groups.heartbeat,
    13: groups.leave_group,
    16: groups.list_groups,
    15: groups.describe_groups,
    42: groups.delete_groups,
    8: group_offsets.offset_commit,
    9: group_offsets.offset_fetch,  # plain: reads the store only
    23: group_offsets.offset_for_leader_epoch,
}
