"""The SQS operations: AWS's operation name -> the function `(call, params) -> response` that
answers it.

One explicit table, imported by the service class (the operation modules import the service only
for type checking)."""
from __future__ import annotations

from typing import Any, Callable

from . import batches, messages_api, move_tasks_api, permissions_api, queues_api

OPERATIONS: dict[str, Callable[..., Any]] = {
    # queues_api
    "CreateQueue": queues_api.create_queue,
    "GetQueueUrl": queues_api.get_queue_url,
    "ListQueues": queues_api.list_queues,
    "DeleteQueue": queues_api.delete_queue,
    "GetQueueAttributes": queues_api.get_queue_attributes,
    "SetQueueAttributes": queues_api.set_queue_attributes,
    "PurgeQueue": queues_api.purge_queue,
    "TagQueue": queues_api.tag_queue,
    "UntagQueue": queues_api.untag_queue,
    "ListQueueTags": queues_api.list_queue_tags,
    "ListDeadLetterSourceQueues": queues_api.list_dead_letter_source_queues,
    # messages_api
    "SendMessage": messages_api.send_message,
    "ReceiveMessage": messages_api.receive_message,
    "DeleteMessage": messages_api.delete_message,
    "ChangeMessageVisibility": messages_api.change_message_visibility,
    # batches
    "SendMessageBatch": batches.send_message_batch,
    "DeleteMessageBatch": batches.delete_message_batch,
    "ChangeMessageVisibilityBatch": batches.change_message_visibility_batch,
    # move_tasks_api
    "StartMessageMoveTask": move_tasks_api.start_message_move_task,
    "ListMessageMoveTasks": move_tasks_api.list_message_move_tasks,
    "CancelMessageMoveTask": move_tasks_api.cancel_message_move_task,
    # permissions_api
    "AddPermission": permissions_api.add_permission,
    "RemovePermission": permissions_api.remove_permission,
}

