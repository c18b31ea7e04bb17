"""S3's errors as values: code, message, HTTP status, and the extra elements S3 puts in its
`<Error>` document (`BucketName`, `Key`, `UploadId`, `Condition`, ...), in the order S3 writes them.

Texts are S3's own (its error-code table and what it returns on the wire).
"""
from __future__ import annotations

from ..protocol.errors import AwsError


class S3Error(AwsError):
    """An S3 error: `details` become child elements of `<Error>` after `<Message>`; `headers` are
    response headers S3 sends with it (`Allow` of a 405)."""

    def __init__(self, code: str, message: str, status: int = 400, *,
                 headers: list[tuple[str, str]] | None = None, **details: object):
        super().__init__(code, message, status)
        self.details = {k: str(v) for k, v in details.items() if v is not None}
        self.headers = list(headers or [])


def no_such_bucket(bucket: str) -> S3Error:
    return S3Error("NoSuchBucket", "The specified bucket does not exist", 404, BucketName=bucket)


def no_such_key(key: str) -> S3Error:
    return S3Error("NoSuchKey", "The specified key does not exist.", 404, Key=key)


def no_such_upload(upload_id: str) -> S3Error:
    return S3Error("NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, "
                   "or the upload may have been aborted or completed.", 404, UploadId=upload_id)


def invalid_bucket_name(bucket: str) -> S3Error:
    return S3Error("InvalidBucketName", "The specified bucket is not valid.", 400, BucketName=bucket)


def bucket_already_exists(bucket: str) -> S3Error:
    """CreateBucket of a name another account's bucket has (bucket names are shared by all accounts)."""
    return S3Error("BucketAlreadyExists", "The requested bucket name is not available. The bucket namespace is "
                   "shared by all users of the system. Please select a different name and try again.", 409,
                   BucketName=bucket)


def wrong_region(signed: str, region: str, presigned: bool) -> S3Error:
    """A request signed for a region that is neither its bucket's nor us-east-1's. S3 names the
    bucket's region in the body and in x-amz-bucket-region (the only place a HEAD answer has it),
    from which SDKs re-send the request signed for that region."""
    if presigned:
        code, message = "AuthorizationQueryParametersError", "Error parsing the X-Amz-Credential parameter;"
    else:
        code, message = "AuthorizationHeaderMalformed", "The authorization header is malformed;"
    return S3Error(code, f"{message} the region '{signed}' is wrong; expecting '{region}'", 400,
                   headers=[("x-amz-bucket-region", region)], Region=region)


def invalid_argument(message: str, name: str | None = None, value: object = None) -> S3Error:
    return S3Error("InvalidArgument", message, 400, ArgumentName=name, ArgumentValue=value)


def invalid_request(message: str) -> S3Error:
    return S3Error("InvalidRequest", message, 400)


def method_not_allowed(method: str, resource: str, allowed: tuple[str, ...] = ()) -> S3Error:
    headers = [("Allow", ", ".join(allowed))] if allowed else None
    return S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.", 405,
                   headers=headers, Method=method, ResourceType=resource)


def invalid_part_number(value: object) -> S3Error:
    return invalid_argument("Part number must be an integer between 1 and 10000, inclusive", "partNumber", value)


def precondition_failed(condition: str) -> S3Error:
    return S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold", 412,
                   Condition=condition)


def malformed_xml() -> S3Error:
    return S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate against our "
                   "published schema", 400)


def bad_digest(message: str, **details: object) -> S3Error:
    return S3Error("BadDigest", message, 400, **details)


def incomplete_body() -> S3Error:
    return S3Error("IncompleteBody", "You did not provide the number of bytes specified by the Content-Length "
                   "HTTP header", 400)
