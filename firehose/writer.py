"""Writing one delivery object: to kinesim's object store, or to an external S3 endpoint."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

if TYPE_CHECKING:  # the buffers count what they take in with activity's fields, which names S3Object
    from .buffers import Record

CONTENT_TYPE = "application/octet-stream"


class DeliveryError(Exception):
    """An object could not be written: AWS's error code (as its CloudWatch logs name it) and text."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass
class S3Object:
    """One object to write, and the records it holds (for the error output if it never lands).
    An error output object also says why its records failed: `output_type` (processing-failed...)
    and, per error code, how many records and the last message (`errors`)."""
    bucket_arn: str
    key: str
    body: bytes
    records: list[Record]
    encoding: str | None = None
    kind: str = "data"            # data | error | backup
    record_count: int = 0
    output_type: str | None = None
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)


def bucket_name(bucket_arn: str) -> str:
    return bucket_arn.split(":::", 1)[-1]


class Writer:
    """Writes objects to kinesim's object store, or, for a bucket it does not have, to the S3
    endpoint given with --firehose-s3-endpoint (credentials from the usual AWS environment)."""

    def __init__(self, settings: Any, objects: Any):
        self.settings, self.objects = settings, objects
        self._client = None

    def put(self, obj: S3Object) -> None:
        bucket = bucket_name(obj.bucket_arn)
        headers = {"Content-Encoding": obj.encoding} if obj.encoding else None
        if self.objects is not None and self.objects.bucket_exists(bucket):
            try:
                staged = self.objects.stage(obj.body)
                try:
                    self.objects.commit(bucket, obj.key, staged, content_type=CONTENT_TYPE, headers=headers)
                finally:
                    staged.discard()
            except AwsError as err:
                raise DeliveryError(f"S3.{err.code}", err.message or err.code) from None
            except OSError as err:
                raise DeliveryError("S3.InternalError", str(err)) from None
            return
        if not self.settings.firehose_s3_endpoint:
            raise DeliveryError("S3.NoSuchBucket", "The specified bucket does not exist")
        self._external(bucket, obj, headers)

    def _external(self, bucket: str, obj: S3Object, headers: dict[str, str] | None) -> None:
        import botocore.exceptions
        if self._client is None:
            import boto3
            self._client = boto3.client("s3", endpoint_url=self.settings.firehose_s3_endpoint,
                                        region_name=self.settings.region)
        extra = {"ContentEncoding": headers["Content-Encoding"]} if headers else {}
        try:
            self._client.put_object(Bucket=bucket, Key=obj.key, Body=obj.body, ContentType=CONTENT_TYPE, **extra)
        except botocore.exceptions.ClientError as err:
            error = err.response.get("Error", {})
            raise DeliveryError(f"S3.{error.get('Code', 'InternalError')}", error.get("Message", str(err))) from None
        except (botocore.exceptions.BotoCoreError, OSError) as err:
            raise DeliveryError("S3.InternalError", str(err)) from None
