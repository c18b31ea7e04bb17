"""The resource types `kinesim deploy` makes, each with its handler: an explicit table, one
import per service module, so what a template may use is read in one place."""
from __future__ import annotations

from .firehose_resources import FirehoseDeliveryStream
from .iam_resources import IamManagedPolicy, IamPolicy, IamRole
from .kinesis_resources import KinesisStream
from .lambda_resources import EventSourceMapping, LambdaFunction
from .resources import ResourceHandler
from .s3_resources import S3Bucket

HANDLERS: dict[str, type[ResourceHandler]] = {h.type_name: h for h in (
    KinesisStream,
    LambdaFunction, EventSourceMapping,
    FirehoseDeliveryStream,
    S3Bucket,
    IamRole, IamPolicy, IamManagedPolicy,
)}
