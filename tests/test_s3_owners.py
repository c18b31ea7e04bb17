"""S3 buckets belong to accounts and live in regions, in one namespace of names shared by every
account and region, as on AWS (issue 34). The caller's account is its 12-digit access key id; a
request signed for a region that is neither the bucket's nor us-east-1's is answered with the
bucket's region, from which boto3 re-sends it there."""
from __future__ import annotations

import io
import json
import os
import urllib.parse
import urllib.request
import uuid
from xml.etree import ElementTree as ET

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import start_server

SERVER_ACCOUNT = "333333333333"  # the server's own account (--account-id): a key of no account's is in it
A, B = "111111111111", "222222222222"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory, account_id=SERVER_ACCOUNT)
    yield proc
    proc.stop()


def s3_of(server, account: str, region: str = "us-east-1", **config):
    return boto3.client("s3", endpoint_url=server.url, region_name=region, aws_access_key_id=account,
                        aws_secret_access_key="secret",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config))


def new_name() -> str:
    return "own-" + uuid.uuid4().hex[:16]


def create(client, name: str, region: str = "us-east-1") -> None:
    where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    client.create_bucket(Bucket=name, **where)


def error_of(excinfo) -> tuple[int, dict]:
    response = excinfo.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]


def signed(server, method: str, path: str, region: str, account: str = A, body: bytes = b""):
    """A request signed by botocore's SigV4 signer for `region` (no redirect follows its answer)."""
    url = server.url + path
    request = AWSRequest(method=method, url=url, data=body, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    SigV4Auth(Credentials(account, "secret"), "s3", region).add_auth(request)
    prepared = urllib.request.Request(url, data=body or None, method=method, headers=dict(request.headers.items()))
    try:
        with urllib.request.urlopen(prepared, timeout=30) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def error_doc(body: bytes) -> dict[str, str]:
    return {child.tag: child.text or "" for child in ET.fromstring(body)}


# ---------------------------------------------------------------------------------------------
# one namespace of bucket names


def test_a_name_another_account_has_is_not_available(server):
    name = new_name()
    create(s3_of(server, A), name)
    for region in ("us-east-1", "eu-west-1"):
        with pytest.raises(ClientError) as excinfo:
            create(s3_of(server, B, region), name, region)
        status, error = error_of(excinfo)
        assert status == 409
        assert error["Code"] == "BucketAlreadyExists"
        assert error["Message"] == ("The requested bucket name is not available. The bucket namespace is shared "
                                    "by all users of the system. Please select a different name and try again.")
        assert error["BucketName"] == name
    assert s3_of(server, A).head_bucket(Bucket=name)["BucketRegion"] == "us-east-1"


def test_your_own_bucket_in_another_region_is_already_owned_by_you(server):
    a = s3_of(server, A)
    name = new_name()
    create(a, name)
    with pytest.raises(ClientError) as excinfo:
        create(s3_of(server, A, "eu-west-1"), name, "eu-west-1")
    status, error = error_of(excinfo)
    assert (status, error["Code"], error["BucketName"]) == (409, "BucketAlreadyOwnedByYou", name)

    elsewhere = new_name()
    create(s3_of(server, A, "us-west-2"), elsewhere, "us-west-2")
    with pytest.raises(ClientError) as excinfo:
        create(a, elsewhere)  # us-east-1: only a us-east-1 bucket is re-created
    assert error_of(excinfo)[1]["Code"] == "BucketAlreadyOwnedByYou"


def test_re_creating_your_us_east_1_bucket_succeeds(server):
    a = s3_of(server, A)
    name = new_name()
    create(a, name)
    a.put_object(Bucket=name, Key="kept", Body=b"1")
    assert a.create_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert a.get_object(Bucket=name, Key="kept")["Body"].read() == b"1"


def test_list_buckets_shows_the_callers_own_buckets(server):
    a, b = s3_of(server, A), s3_of(server, B, "eu-west-1")
    mine, theirs = new_name(), new_name()
    create(a, mine)
    create(b, theirs, "eu-west-1")
    listed_a, listed_b = a.list_buckets(), b.list_buckets()
    names_a = {x["Name"] for x in listed_a["Buckets"]}
    names_b = {x["Name"] for x in listed_b["Buckets"]}
    assert mine in names_a and theirs not in names_a
    assert theirs in names_b and mine not in names_b
    assert {x["BucketRegion"] for x in listed_b["Buckets"] if x["Name"] == theirs} == {"eu-west-1"}
    assert listed_a["Owner"]["ID"] != listed_b["Owner"]["ID"]
    assert len(listed_a["Owner"]["ID"]) == 64
    # Every region's buckets of the account, whichever region the caller signs for.
    assert theirs in {x["Name"] for x in s3_of(server, B, "us-east-1").list_buckets()["Buckets"]}
    # Objects listed are the bucket owner's.
    a.put_object(Bucket=mine, Key="k", Body=b"")
    assert a.list_objects(Bucket=mine)["Contents"][0]["Owner"]["ID"] == listed_a["Owner"]["ID"]


# ---------------------------------------------------------------------------------------------
# regions


def test_boto3_in_another_region_is_redirected_to_the_buckets(server):
    name = new_name()
    create(s3_of(server, A, "us-west-2"), name, "us-west-2")
    europe = s3_of(server, A, "eu-west-1")
    sent: list[str] = []  # the region each request was signed for
    europe.meta.events.register("before-send.s3", lambda request, **_: sent.append(
        request.headers["Authorization"].decode().split("/")[2]))
    europe.put_object(Bucket=name, Key="k", Body=b"hello")
    assert sent == ["eu-west-1", "us-west-2"]  # refused, then re-sent signed for the bucket's region
    assert europe.get_object(Bucket=name, Key="k")["Body"].read() == b"hello"
    assert europe.head_object(Bucket=name, Key="k")["ContentLength"] == 5
    assert s3_of(server, A, "eu-west-1").head_bucket(Bucket=name)["BucketRegion"] == "us-west-2"
    assert s3_of(server, A, "eu-west-1").head_object(Bucket=name, Key="k")["ContentLength"] == 5
    assert [o["Key"] for o in europe.list_objects_v2(Bucket=name)["Contents"]] == ["k"]
    assert europe.get_bucket_location(Bucket=name)["LocationConstraint"] == "us-west-2"
    europe.delete_object(Bucket=name, Key="k")
    # Signed for us-east-1 (S3's global endpoint) or for the bucket's region: served at once.
    for region in ("us-east-1", "us-west-2"):
        client = s3_of(server, A, region)
        client.put_object(Bucket=name, Key=region, Body=b"x")
        assert client.get_bucket_location(Bucket=name)["LocationConstraint"] == "us-west-2"
        assert client.head_bucket(Bucket=name)["BucketRegion"] == "us-west-2"


def test_a_request_signed_for_the_wrong_region_names_the_buckets(server):
    name = new_name()
    create(s3_of(server, A, "us-west-2"), name, "us-west-2")
    s3_of(server, A, "us-west-2").put_object(Bucket=name, Key="k", Body=b"v")

    status, headers, body = signed(server, "GET", f"/{name}/k", "eu-west-1")
    assert status == 400
    error = error_doc(body)
    assert error["Code"] == "AuthorizationHeaderMalformed"
    assert error["Message"] == ("The authorization header is malformed; the region 'eu-west-1' is wrong; "
                                "expecting 'us-west-2'")
    assert error["Region"] == "us-west-2"
    assert headers["x-amz-bucket-region"] == "us-west-2"

    status, headers, body = signed(server, "HEAD", f"/{name}", "eu-west-1")
    assert (status, body, headers["x-amz-bucket-region"]) == (400, b"", "us-west-2")

    for region in ("us-west-2", "us-east-1"):
        assert signed(server, "GET", f"/{name}/k", region)[::2] == (200, b"v")
    # Any account's request alike: the region is checked before whose the bucket is.
    assert signed(server, "GET", f"/{name}/k", "eu-west-1", account=B)[0] == 400
    # A bucket that does not exist is NoSuchBucket, whatever the region.
    status, _, body = signed(server, "GET", f"/{new_name()}/k", "eu-west-1")
    assert (status, error_doc(body)["Code"]) == (404, "NoSuchBucket")
    # Signed for a name that is no region ("local"): in the server's region, us-east-1.
    assert signed(server, "GET", f"/{name}/k", "local")[::2] == (200, b"v")


def test_presigned_and_unsigned_requests(server):
    name = new_name()
    create(s3_of(server, A, "us-west-2"), name, "us-west-2")
    s3_of(server, A, "us-west-2").put_object(Bucket=name, Key="k", Body=b"v")

    def fetch(url: str):
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def presigned(region: str, **config) -> str:
        return s3_of(server, A, region, **config).generate_presigned_url("get_object",
                                                                          Params={"Bucket": name, "Key": "k"})

    wrong = presigned("eu-west-1", signature_version="s3v4")
    status, body = fetch(wrong)
    error = error_doc(body)
    assert (status, error["Code"], error["Region"]) == (400, "AuthorizationQueryParametersError", "us-west-2")
    assert error["Message"] == ("Error parsing the X-Amz-Credential parameter; the region 'eu-west-1' is wrong; "
                                "expecting 'us-west-2'")
    for region in ("us-west-2", "us-east-1"):
        assert fetch(presigned(region, signature_version="s3v4")) == (200, b"v")
    # Signed with SigV2 (boto3's presigned URLs by default): no region to be wrong, the key's account.
    assert "X-Amz-Credential" not in presigned("eu-west-1")
    assert fetch(presigned("eu-west-1")) == (200, b"v")
    # Unsigned: the server's account, not the owner; the bucket has no policy that lets it read.
    status, body = fetch(f"{server.url}/{name}/k")
    assert (status, error_doc(body)["Code"]) == (403, "AccessDenied")


# ---------------------------------------------------------------------------------------------
# data directories written before buckets had owners


def test_a_bucket_recorded_without_an_owner_is_the_servers_accounts(server):
    default = s3_of(server, "test")  # no account's key: the server's account
    name = new_name()
    create(default, name)
    record_path = os.path.join(server.settings.data_dir, "s3", ".buckets", name + ".json")
    with open(record_path) as f:
        record = json.load(f)
    assert record["owner"] == SERVER_ACCOUNT
    del record["owner"]
    with open(record_path, "w") as f:
        json.dump(record, f)

    assert name in {x["Name"] for x in default.list_buckets()["Buckets"]}
    assert name in {x["Name"] for x in s3_of(server, SERVER_ACCOUNT).list_buckets()["Buckets"]}
    assert name not in {x["Name"] for x in s3_of(server, A).list_buckets()["Buckets"]}
    assert default.create_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(ClientError) as excinfo:
        create(s3_of(server, A), name)
    assert error_of(excinfo)[1]["Code"] == "BucketAlreadyExists"


def test_a_bucket_directory_made_by_hand_is_the_servers_accounts(server):
    name = new_name()
    os.makedirs(os.path.join(server.settings.data_dir, "s3", name))
    default = s3_of(server, "test")
    assert name in {x["Name"] for x in default.list_buckets()["Buckets"]}
    with pytest.raises(ClientError) as excinfo:
        create(s3_of(server, B), name)
    assert error_of(excinfo)[1]["Code"] == "BucketAlreadyExists"


def test_the_edges_scope_is_the_requests(tmp_path):
    # The edge puts the request's scope in the environ; S3 takes it rather than working one out.
    from kinesim.config import Settings
    from kinesim.s3.api import S3App
    from kinesim.s3.objects import ObjectStore
    from kinesim.scopes import ENVIRON_KEY, Scope

    app = S3App(ObjectStore(str(tmp_path / "s3")), Settings(account_id=SERVER_ACCOUNT))

    def call(method: str, path: str, scope: Scope | None):
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "HTTP_HOST": "127.0.0.1",
                   "wsgi.input": io.BytesIO(b""), "CONTENT_LENGTH": "0",
                   # Signed for eu-west-1 by account A's key, which the scope (when there is one) overrides.
                   "HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential={A}/20260101/eu-west-1/s3/aws4_request, "
                                         "SignedHeaders=host, Signature=0"}
        if scope is not None:
            environ[ENVIRON_KEY] = scope
        answer = {}
        body = b"".join(app(environ, lambda status, headers: answer.update(status=status)))
        return int(answer["status"].split()[0]), body

    assert call("PUT", "/edge-bucket", Scope(B, "us-east-1"))[0] == 200
    assert app.objects.bucket_info("edge-bucket").owner == B
    assert call("GET", "/edge-bucket", Scope(B, "us-east-1"))[0] == 200
    status, body = call("GET", "/edge-bucket", None)  # worked out: A, signed for eu-west-1
    assert status == 400 and b"AuthorizationHeaderMalformed" in body
    assert b"edge-bucket" in call("GET", "/", Scope(B, "eu-west-1"))[1]
    assert b"edge-bucket" not in call("GET", "/", Scope(A, "us-east-1"))[1]
