"""The Kinesis operations: AWS's operation name -> the function `(service, params) -> response`
that answers it.

One explicit table, imported by the service class: the operation modules do not import the service
at run time (only for type checking), so the package's import graph has no cycle."""
from __future__ import annotations

from typing import Any, Callable

from . import (
    channels, consumers, iterators, policies, queue_dlq, queue_records, queues, records, resharding, shards,
    streams, tags,
)

OPERATIONS: dict[str, Callable[..., Any]] = {
    # streams
    "CreateStream": streams.create_stream,
    "DeleteStream": streams.delete_stream,
    "DescribeStream": streams.describe_stream,
    "DescribeStreamSummary": streams.describe_stream_summary,
    "ListStreams": streams.list_streams,
    "UpdateStreamMode": streams.update_stream_mode,
    "IncreaseStreamRetentionPeriod": streams.increase_retention,
    "DecreaseStreamRetentionPeriod": streams.decrease_retention,
    "StartStreamEncryption": streams.start_encryption,
    "StopStreamEncryption": streams.stop_encryption,
    "EnableEnhancedMonitoring": streams.enable_monitoring,
    "DisableEnhancedMonitoring": streams.disable_monitoring,
    "DescribeLimits": streams.describe_limits,
    "UpdateMaxRecordSize": streams.update_max_record_size,
    "UpdateStreamWarmThroughput": streams.update_warm_throughput,
    "UpdateStreamRecordDistributionStrategy": streams.update_distribution,
    "DescribeAccountSettings": streams.describe_account_settings,
    "UpdateAccountSettings": streams.update_account_settings,
    # records
    "PutRecord": records.put_record,
    "PutRecords": records.put_records,
    "GetRecords": records.get_records,
    # shards
    "ListShards": shards.list_shards,
    # iterators
    "GetShardIterator": iterators.get_shard_iterator,
    # resharding
    "SplitShard": resharding.split_shard,
    "MergeShards": resharding.merge_shards,
    "UpdateShardCount": resharding.update_shard_count,
    # consumers
    "RegisterStreamConsumer": consumers.register_stream_consumer,
    "DeregisterStreamConsumer": consumers.deregister_stream_consumer,
    "DescribeStreamConsumer": consumers.describe_stream_consumer,
    "ListStreamConsumers": consumers.list_stream_consumers,
    "SubscribeToShard": consumers.subscribe_to_shard,
    # tags
    "AddTagsToStream": tags.add_tags_to_stream,
    "RemoveTagsFromStream": tags.remove_tags_from_stream,
    "ListTagsForStream": tags.list_tags_for_stream,
    "TagResource": tags.tag_resource,
    "UntagResource": tags.untag_resource,
    "ListTagsForResource": tags.list_tags_for_resource,
    # policies
    "PutResourcePolicy": policies.put_resource_policy,
    "GetResourcePolicy": policies.get_resource_policy,
    "DeleteResourcePolicy": policies.delete_resource_policy,
    # channels (delivery into S3: channel_delivery.py)
    "CreateChannel": channels.create_channel,
    "DescribeChannel": channels.describe_channel,
    "ListChannels": channels.list_channels,
    "UpdateChannel": channels.update_channel,
    "DeleteChannel": channels.delete_channel,
    # queues
    "CreateQueue": queues.create_queue,
    "DescribeQueue": queues.describe_queue,
    "ListQueues": queues.list_queues,
    "UpdateQueue": queues.update_queue,
    "DeleteQueue": queues.delete_queue,
    "ReceiveQueueRecords": queue_records.receive_queue_records,
    "AcknowledgeQueueRecords": queue_records.acknowledge_queue_records,
    "UpdateQueueRecordsVisibility": queue_records.update_queue_records_visibility,
    "ReceiveDeadLetterQueueRecords": queue_dlq.receive_dead_letter_queue_records,
    "AcknowledgeDeadLetterQueueRecords": queue_dlq.acknowledge_dead_letter_queue_records,
    "UpdateDeadLetterQueueRecordsVisibility": queue_dlq.update_dead_letter_queue_records_visibility,
    "RestoreDeadLetterQueueRecords": queue_dlq.restore_dead_letter_queue_records,
}
