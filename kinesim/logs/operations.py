"""The CloudWatch Logs operations: AWS's operation name -> the function `(service, params) -> response`
that answers it.

One explicit table, imported by the service class (the operation modules import the service only
for type checking)."""
from __future__ import annotations

from typing import Any, Callable

from . import events_api, groups_api, streams_api

OPERATIONS: dict[str, Callable[..., Any]] = {
    # groups_api
    "CreateLogGroup": groups_api.create_log_group,
    "DescribeLogGroups": groups_api.describe_log_groups,
    "DeleteLogGroup": groups_api.delete_log_group,
    "PutLogGroupDeletionProtection": groups_api.put_log_group_deletion_protection,
    "PutRetentionPolicy": groups_api.put_retention_policy,
    "DeleteRetentionPolicy": groups_api.delete_retention_policy,
    "TagResource": groups_api.tag_resource,
    "UntagResource": groups_api.untag_resource,
    "ListTagsForResource": groups_api.list_tags_for_resource,
    "TagLogGroup": groups_api.tag_log_group,
    "UntagLogGroup": groups_api.untag_log_group,
    "ListTagsLogGroup": groups_api.list_tags_log_group,
    # streams_api
    "CreateLogStream": streams_api.create_log_stream,
    "DescribeLogStreams": streams_api.describe_log_streams,
    "DeleteLogStream": streams_api.delete_log_stream,
    # events_api
    "PutLogEvents": events_api.put_log_events,
    "GetLogEvents": events_api.get_log_events,
    "FilterLogEvents": events_api.filter_log_events,
}

