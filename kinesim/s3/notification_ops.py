"""PutBucketNotificationConfiguration and GetBucketNotificationConfiguration (`?notification`,
also what the deprecated PutBucketNotification / GetBucketNotification call), and the request
facts a write hands to its notifications."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import trace_header
from . import notification_config
from .exchange import Request, Response, not_implemented, xml_response
from .notification_events import WriteOrigin, new_host_id, new_request_id

if TYPE_CHECKING:
    from .notifications import BucketNotifications

# Set by the S3 app on each request so that an event names the request that caused it.
REQUEST_ID = "kinesim.s3.request_id"
HOST_ID = "kinesim.s3.host_id"


def _service(req: Request) -> "BucketNotifications":
    service = getattr(req.objects, "notifications", None)
    if service is None:  # an object store used without the server around it
        raise not_implemented("notification")
    return service


def request_ids(req: Request) -> tuple[str, str]:
    return req.environ.get(REQUEST_ID) or new_request_id(), req.environ.get(HOST_ID) or new_host_id()


def origin(req: Request, event: str) -> WriteOrigin:
    """What an event says about the request that caused it, and the trace header it carries on."""
    request_id, host_id = request_ids(req)
    return WriteOrigin(event=event, request_id=request_id, host_id=host_id,
                       source_ip=req.environ.get("REMOTE_ADDR") or "127.0.0.1",
                       trace_header=trace_header.from_environ(req.environ))


def put_bucket_notification_configuration(req: Request) -> Response:
    service = _service(req)
    info = req.objects.bucket_info(req.bucket)  # NoSuchBucket first
    config = notification_config.parse(req.xml_body())
    skip = (req.header("x-amz-skip-destination-validation") or "").strip().lower() == "true"
    request_id, host_id = request_ids(req)
    service.put_configuration(req.bucket, info.region, config, request_id, host_id, skip_validation=skip)
    return Response(200)


def get_bucket_notification_configuration(req: Request) -> Response:
    service = _service(req)
    req.objects.bucket_info(req.bucket)
    return xml_response(notification_config.render(service.configuration(req.bucket)))
