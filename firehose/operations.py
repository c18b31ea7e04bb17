"""The Firehose operations: AWS's operation name -> the function `(service, params) -> response`
that answers it.

One explicit table, imported by the service class (the operation modules import the service only
for type checking)."""
from __future__ import annotations

from typing import Any, Callable

from . import records_api, streams_api

OPERATIONS: dict[str, Callable[..., Any]] = {
    # streams_api
    "CreateDeliveryStream": streams_api.create_delivery_stream,
    "DescribeDeliveryStream": streams_api.describe_delivery_stream,
    "ListDeliveryStreams": streams_api.list_delivery_streams,
    "DeleteDeliveryStream": streams_api.delete_delivery_stream,
    "UpdateDestination": streams_api.update_destination,
    "TagDeliveryStream": streams_api.tag_delivery_stream,
    "UntagDeliveryStream": streams_api.untag_delivery_stream,
    "ListTagsForDeliveryStream": streams_api.list_tags_for_delivery_stream,
    "StartDeliveryStreamEncryption": streams_api.start_delivery_stream_encryption,
    "StopDeliveryStreamEncryption": streams_api.stop_delivery_stream_encryption,
    # records_api
    "PutRecord": records_api.put_record,
    "PutRecordBatch": records_api.put_record_batch,
}

