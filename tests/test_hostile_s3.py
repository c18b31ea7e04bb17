"""S3 under hostile input (issue 9): odd sub-resource combinations and links planted in bucket
directories get S3's 4xx answers, never a 500, and the server keeps answering.

Where AWS's answer is not in LocalStack's recordings, it is taken from versitygw, whose issues and
router record what S3 itself returns (issues 1226, 1236 and 1237 quote S3's responses)."""
from __future__ import annotations

import os
import uuid
from xml.etree import ElementTree as ET

import pytest
import requests
from botocore.exceptions import ClientError

from test_s3_api import bucket, s3  # noqa: F401 (fixtures)

MiB = 1024 * 1024




def bucket_dir(server, bucket: str) -> str:
    return os.path.join(server.settings.data_dir, "s3", bucket)


def call(server, method: str, path: str, **kwargs) -> requests.Response:
    resp = requests.request(method, server.url + path, timeout=30, **kwargs)
    assert resp.status_code < 500, (method, path, resp.status_code, resp.text)
    assert requests.get(server.url + "/_kinesim/health", timeout=10).ok  # the server is unharmed
    return resp


def error(resp: requests.Response) -> dict[str, str]:
    return {child.tag: child.text for child in ET.fromstring(resp.content)}


# ---------------------------------------------------------------------------------------------
# sub-resources (item 7)


@pytest.mark.parametrize("copy", [False, True], ids=["UploadPart", "UploadPartCopy"])
def test_part_number_without_upload_id(server, s3, bucket, copy):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source")
    headers = {"x-amz-copy-source": f"/{bucket}/src"} if copy else {}
    resp = call(server, "PUT", f"/{bucket}/k?partNumber=1", data=b"part", headers=headers)
    # S3's own answer (versitygw issues 1226 and 1237), ArgumentValue included.
    assert resp.status_code == 400
    assert error(resp) | {"RequestId": None, "HostId": None} == {
        "Code": "InvalidArgument", "Message": "This operation does not accept partNumber without uploadId",
        "ArgumentName": "partNumber", "ArgumentValue": "partNumber", "RequestId": None, "HostId": None}
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="k")  # nothing was stored


@pytest.mark.parametrize("copy", [False, True], ids=["UploadPart", "UploadPartCopy"])
def test_upload_id_without_part_number(server, s3, bucket, copy):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source")
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    headers = {"x-amz-copy-source": f"/{bucket}/src"} if copy else {}
    resp = call(server, "PUT", f"/{bucket}/k?uploadId={upload_id}", data=b"part", headers=headers)
    # S3: 405 for the UPLOAD resource, which allows DELETE, POST and GET (versitygw issue 1236).
    assert resp.status_code == 405
    assert resp.headers["Allow"] == "DELETE, POST, GET"
    err = error(resp)
    assert (err["Code"], err["Method"], err["ResourceType"]) == ("MethodNotAllowed", "PUT", "UPLOAD")
    assert s3.list_parts(Bucket=bucket, Key="k", UploadId=upload_id).get("Parts", []) == []


@pytest.mark.parametrize("value", ["abc", "0", "-1", "10001", "1.5", "", "99999999999999999999999"])
def test_part_number_out_of_range(server, s3, bucket, value):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    s3.put_object(Bucket=bucket, Key="obj", Body=b"hello")
    for method, path in (("PUT", f"/{bucket}/k?uploadId={upload_id}&partNumber={value}"),
                         ("GET", f"/{bucket}/obj?partNumber={value}")):
        resp = call(server, method, path, data=b"x" if method == "PUT" else None)
        assert resp.status_code == 400, (method, resp.text)
        err = error(resp)
        assert err["Code"] == "InvalidArgument" and err["ArgumentName"] == "partNumber"
        assert err["Message"] == "Part number must be an integer between 1 and 10000, inclusive"
    resp = call(server, "HEAD", f"/{bucket}/obj?partNumber={value}")
    assert resp.status_code == 400


def test_uploads_and_versions_on_an_object(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="obj", Body=b"hello")
    resp = call(server, "GET", f"/{bucket}/obj?uploads")
    assert resp.status_code == 400
    assert error(resp)["Code"] == "InvalidRequest"
    assert error(resp)["Message"] == "Key is not expected for the GET method ?uploads subresource"
    resp = call(server, "GET", f"/{bucket}/obj?versions")
    assert resp.status_code == 400
    assert error(resp)["Message"] == "There is no such thing as the ?versions sub-resource for a key"


def test_get_object_part(server, s3, bucket):
    """GetObject / HeadObject with PartNumber, as LocalStack's recording of S3 shows it
    (test_get_object_part): 206 with the part's range and PartsCount, 416 past the last part,
    400 together with a Range."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    parts = []
    for number, body in ((1, b"a" * (5 * MiB)), (2, b"test content 123")):
        etag = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=number, Body=body)["ETag"]
        parts.append({"ETag": etag, "PartNumber": number})
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload_id, MultipartUpload={"Parts": parts})
    got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=2)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206 and got["Body"].read() == b"test content 123"
    assert got["ContentRange"] == f"bytes {5 * MiB}-{5 * MiB + 15}/{5 * MiB + 16}" and got["PartsCount"] == 2
    head = s3.head_object(Bucket=bucket, Key="mp", PartNumber=1)
    assert head["ContentLength"] == 5 * MiB and head["PartsCount"] == 2
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=10)
    assert e.value.response["Error"] | {"Message": None} == {
        "Code": "InvalidPartNumber", "Message": None, "PartNumberRequested": "10", "ActualPartCount": "2"}
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=2, Range="bytes=0-8")
    assert e.value.response["Error"]["Message"] == "Cannot specify both Range header and partNumber query parameter"

    s3.put_object(Bucket=bucket, Key="single", Body=b"test-123")
    got = s3.get_object(Bucket=bucket, Key="single", PartNumber=1)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206 and got["ContentRange"] == "bytes 0-7/8"
    assert got["Body"].read() == b"test-123" and "PartsCount" not in got
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="single", PartNumber=2)
    assert e.value.response["Error"]["ActualPartCount"] == "1"


# ---------------------------------------------------------------------------------------------
# links planted in bucket directories (item 11): never followed, never objects


def test_symlink_loop_in_bucket(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="real", Body=b"kept")
    bdir = bucket_dir(server, bucket)
    os.symlink("loop", os.path.join(bdir, "loop"))          # loops on itself
    os.mkdir(os.path.join(bdir, "d"))
    os.symlink("..", os.path.join(bdir, "d", "up"))         # a directory cycle
    for method in ("GET", "HEAD"):
        assert call(server, method, f"/{bucket}/loop").status_code == 404
        assert call(server, method, f"/{bucket}/d/up/real").status_code == 404
    for query in ("", "?list-type=2", "?delimiter=/", "?prefix=d/", "?prefix=d/up/", "?prefix=lo"):
        assert call(server, "GET", f"/{bucket}{query}").status_code == 200
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["real"]
    page = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [o["Key"] for o in page["Contents"]] == ["real"] and "CommonPrefixes" not in page


def test_symlink_out_of_bucket_never_served(server, s3, bucket, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"outside the bucket")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "f").write_bytes(b"outside too")
    bdir = bucket_dir(server, bucket)
    os.symlink(secret, os.path.join(bdir, "passwd"))
    os.symlink(outside_dir, os.path.join(bdir, "dir"))
    for method in ("GET", "HEAD"):
        assert call(server, method, f"/{bucket}/passwd").status_code == 404
        assert call(server, method, f"/{bucket}/dir/f").status_code == 404
    resp = call(server, "PUT", f"/{bucket}/dest", headers={"x-amz-copy-source": f"/{bucket}/passwd"})
    assert resp.status_code == 404
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    assert "CommonPrefixes" not in s3.list_objects_v2(Bucket=bucket, Delimiter="/")

    # Writing through a linked directory is refused; writing a key that is a link replaces the
    # link, never the file it points to.
    resp = call(server, "PUT", f"/{bucket}/dir/g", data=b"evil")
    assert resp.status_code == 400 and error(resp)["Code"] == "InvalidArgument"
    assert sorted(os.listdir(outside_dir)) == ["f"]
    s3.put_object(Bucket=bucket, Key="passwd", Body=b"new object")
    assert secret.read_bytes() == b"outside the bucket"
    assert s3.get_object(Bucket=bucket, Key="passwd")["Body"].read() == b"new object"
    s3.delete_object(Bucket=bucket, Key="dir/f")
    assert (outside_dir / "f").read_bytes() == b"outside too"


def test_symlink_inside_bucket_is_not_an_object(server, s3, bucket):
    """Even a link to an object of the same bucket is not served: what a link points to can change
    between a check and the open, so links are never followed at all."""
    s3.put_object(Bucket=bucket, Key="a/real", Body=b"data")
    bdir = bucket_dir(server, bucket)
    os.symlink("real", os.path.join(bdir, "a", "alias"))
    os.symlink("a", os.path.join(bdir, "b"))
    assert call(server, "GET", f"/{bucket}/a/alias").status_code == 404
    assert call(server, "GET", f"/{bucket}/b/real").status_code == 404
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/real"]


def test_fifo_in_bucket_does_not_hang(server, s3, bucket):
    os.mkfifo(os.path.join(bucket_dir(server, bucket), "pipe"))
    assert call(server, "GET", f"/{bucket}/pipe").status_code == 404
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_symlink_loop_beside_buckets(server, s3, bucket):
    root = os.path.join(server.settings.data_dir, "s3")
    name = "loop-" + uuid.uuid4().hex[:8]
    os.symlink(name, os.path.join(root, name))
    try:
        assert bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        assert call(server, "GET", f"/{name}").status_code == 404
    finally:
        os.unlink(os.path.join(root, name))


def test_bucket_directory_that_is_a_link(server, s3, tmp_path):
    """A user may keep a bucket elsewhere (its directory a link beside the others): it is served,
    and deleting the bucket removes the link, never the user's directory."""
    elsewhere = tmp_path / "kept-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.csv").write_bytes(b"1,2\n")
    name = "linked-" + uuid.uuid4().hex[:8]
    os.symlink(elsewhere, bucket_dir(server, name))
    assert s3.get_object(Bucket=name, Key="data.csv")["Body"].read() == b"1,2\n"
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert e.value.response["Error"]["Code"] == "BucketNotEmpty"
    s3.delete_object(Bucket=name, Key="data.csv")
    (elsewhere / "notes").mkdir()
    s3.delete_bucket(Bucket=name)
    assert not os.path.lexists(bucket_dir(server, name)) and (elsewhere / "notes").is_dir()
    assert call(server, "GET", f"/{name}").status_code == 404


def test_list_uploads_and_parts_with_zero_max(server, s3, bucket):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1, Body=b"x")
    assert call(server, "GET", f"/{bucket}?uploads&max-uploads=0").status_code == 200
    assert s3.list_multipart_uploads(Bucket=bucket, MaxUploads=0)["IsTruncated"] is True
    assert call(server, "GET", f"/{bucket}/k?uploadId={upload_id}&max-parts=0").status_code == 200
