"""A bucket's configurations through the real server (boto3): CORS, lifecycle (applied by the
sweep), policy, encryption (answered on objects), public access block, tags, ownership controls,
versioning; a new bucket's defaults; AWS's errors; and the same configurations set by `kinesim
deploy` from a template, and removed by an update.

Expected answers are AWS's, as recorded in LocalStack's snapshot files
(tests/aws/services/s3/test_s3_api.snapshot.json, test_s3_cors.snapshot.json, test_s3.snapshot.json)."""
from __future__ import annotations

import datetime
import json
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from kinesim.config import Settings
from kinesim.deploy import cli
from kinesim.s3 import lifecycle_sweep
from kinesim.server import InProcessServer, free_port

from conftest import client_for, wait_for

MALFORMED = ("MalformedXML", "The XML you provided was not well-formed or did not validate against our published "
             "schema")


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3")


@pytest.fixture(scope="module")
def unchecked(server):
    """A client that sends what botocore's own checks would stop, for S3 to judge."""
    return client_for(server.url, "s3", parameter_validation=False)


@pytest.fixture
def bucket(s3):
    name = "cfg-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    return name


def error(call, **kwargs) -> tuple[str, str, int, dict]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    response = info.value.response
    return (response["Error"]["Code"], response["Error"].get("Message"), response["ResponseMetadata"]["HTTPStatusCode"],
            response["Error"])


def body(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def status(response: dict) -> int:
    return response["ResponseMetadata"]["HTTPStatusCode"]


# ---------------------------------------------------------------------------------------------
# a new bucket


def test_new_bucket_defaults_as_aws(s3, bucket):
    assert body(s3.get_bucket_encryption(Bucket=bucket)) == {"ServerSideEncryptionConfiguration": {"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": False}]}}
    assert body(s3.get_bucket_ownership_controls(Bucket=bucket)) == {
        "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}}
    assert body(s3.get_public_access_block(Bucket=bucket)) == {"PublicAccessBlockConfiguration": {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}}
    assert body(s3.get_bucket_versioning(Bucket=bucket)) == {}
    missing = {
        s3.get_bucket_cors: ("NoSuchCORSConfiguration", "The CORS configuration does not exist"),
        s3.get_bucket_lifecycle_configuration: ("NoSuchLifecycleConfiguration",
                                                "The lifecycle configuration does not exist"),
        s3.get_bucket_policy: ("NoSuchBucketPolicy", "The bucket policy does not exist"),
        s3.get_bucket_policy_status: ("NoSuchBucketPolicy", "The bucket policy does not exist"),
        s3.get_bucket_tagging: ("NoSuchTagSet", "The TagSet does not exist"),
    }
    for call, (code, message) in missing.items():
        got = error(call, Bucket=bucket)
        assert got[:3] == (code, message, 404) and got[3]["BucketName"] == bucket


def test_no_such_bucket(s3):
    name = "nobucket-" + uuid.uuid4().hex[:10]
    for call, kwargs in ((s3.get_bucket_encryption, {}), (s3.get_bucket_cors, {}),
                         (s3.put_bucket_tagging, {"Tagging": {"TagSet": []}}),
                         (s3.put_bucket_versioning, {"VersioningConfiguration": {"Status": "Enabled"}}),
                         (s3.delete_bucket_policy, {})):
        assert error(call, Bucket=name, **kwargs)[:3] == ("NoSuchBucket", "The specified bucket does not exist", 404)


# ---------------------------------------------------------------------------------------------
# each configuration: put, get, delete, and its errors


def test_cors_round_trip_and_errors(s3, bucket):
    rules = [{"AllowedHeaders": ["x-amz-expected-bucket-owner"], "AllowedMethods": ["GET", "PUT", "HEAD"],
              "AllowedOrigins": ["https://test.com", "http://test.com:80"], "ExposeHeaders": ["ETag"],
              "MaxAgeSeconds": 3000, "ID": "one"}, {"AllowedMethods": ["GET"], "AllowedOrigins": [""]}]
    assert status(s3.delete_bucket_cors(Bucket=bucket)) == 204  # nothing to delete is fine
    assert status(s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})) == 200
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == rules
    bad = {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET", "MYMETHOD"]}]}
    assert error(s3.put_bucket_cors, Bucket=bucket, CORSConfiguration=bad)[:3] == (
        "InvalidRequest", "Found unsupported HTTP method in CORS config. Unsupported method is MYMETHOD", 400)
    assert error(s3.put_bucket_cors, Bucket=bucket, CORSConfiguration={"CORSRules": []})[:3] == (*MALFORMED, 400)
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == rules  # a refused put changes nothing
    assert status(s3.delete_bucket_cors(Bucket=bucket)) == 204
    assert error(s3.get_bucket_cors, Bucket=bucket)[0] == "NoSuchCORSConfiguration"


def test_lifecycle_round_trip_and_errors(s3, bucket):
    rules = [{"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 7},
              "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
             {"ID": "size", "Filter": {"And": {"Prefix": "tmp/", "ObjectSizeGreaterThan": 10,
                                               "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}},
              "Status": "Disabled",
              "Expiration": {"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)}}]
    put = s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    assert status(put) == 200 and put["TransitionDefaultMinimumObjectSize"] == "all_storage_classes_128K"
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert got["TransitionDefaultMinimumObjectSize"] == "all_storage_classes_128K"
    assert got["Rules"][0] == rules[0]
    assert got["Rules"][1]["Expiration"]["Date"] == datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
    assert got["Rules"][1]["Filter"] == rules[1]["Filter"]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules},
                                          TransitionDefaultMinimumObjectSize="varies_by_storage_class")
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["TransitionDefaultMinimumObjectSize"] == \
        "varies_by_storage_class"
    assert error(s3.put_bucket_lifecycle_configuration, Bucket=bucket, LifecycleConfiguration={"Rules": rules},
                 TransitionDefaultMinimumObjectSize="small")[:3] == (
        "InvalidRequest", "Invalid TransitionDefaultMinimumObjectSize found: small", 400)
    # A rule without an ID gets one.
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        {"Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1}}]})
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"][0]["ID"]

    def put_rule(**rule):
        return error(s3.put_bucket_lifecycle_configuration, Bucket=bucket, LifecycleConfiguration={"Rules": [rule]})
    assert put_rule(ID="x", Status="Enabled", Expiration={"Days": 7})[:3] == (*MALFORMED, 400)  # no Filter
    assert put_rule(ID="x", Status="Enabled", Filter={"Prefix": "", "ObjectSizeGreaterThan": 5},
                    Expiration={"Days": 7})[:3] == (*MALFORMED, 400)
    assert put_rule(ID="x", Status="Enabled", Filter={}, Expiration={"Days": 1},
                    NoncurrentVersionExpiration={})[:3] == (*MALFORMED, 400)
    assert put_rule(ID="x", Status="Enabled", Filter={},
                    Expiration={"Days": 1, "ExpiredObjectDeleteMarker": True})[:3] == (*MALFORMED, 400)
    code, message, http, err = put_rule(ID="x", Status="Enabled", Filter={},
                                        Expiration={"Date": datetime.datetime(2023, 1, 1, 2, 2)})
    assert (code, message, http, err["ArgumentName"]) == ("InvalidArgument", "'Date' must be at midnight GMT", 400,
                                                          "Date")
    assert put_rule(ID="x", Status="Enabled", Expiration={"Days": 1}, Filter={"And": {"Tags": [
        {"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]}})[:3] == (
        "InvalidRequest", "Duplicate Tag Keys are not allowed.", 400)
    assert put_rule(ID="x", Status="Enabled", Filter={})[:3] == (
        "InvalidRequest", "At least one action needs to be specified in a rule", 400)
    assert put_rule(ID="x", Status="enabled", Filter={}, Expiration={"Days": 1})[:3] == (*MALFORMED, 400)
    assert status(s3.delete_bucket_lifecycle(Bucket=bucket)) == 204
    assert error(s3.get_bucket_lifecycle_configuration, Bucket=bucket)[:3] == (
        "NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist", 404)
    assert status(s3.delete_bucket_lifecycle(Bucket=bucket)) == 204


def test_policy_round_trip_status_and_errors(s3, bucket):
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                      "Action": "s3:GetObject",
                                                      "Resource": f"arn:aws:s3:::{bucket}/*"}]}
    # A new bucket blocks public policies (BlockPublicPolicy): S3 refuses one.
    assert error(s3.put_bucket_policy, Bucket=bucket, Policy=json.dumps(policy))[:3] == (
        "AccessDenied", "Access Denied", 403)
    s3.delete_public_access_block(Bucket=bucket)
    assert status(s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))) == 204
    assert json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"]) == policy
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"] == {"IsPublic": True}
    private = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::1:root"},
                                                       "Action": "s3:*", "Resource": "*"}]}
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(private))
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"] == {"IsPublic": False}
    everyone = policy["Statement"][0]
    for condition, public in (({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, False),
                              ({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}, True),
                              ({"StringEquals": {"aws:SourceAccount": "123456789012"}}, False),
                              ({"ArnLike": {"aws:SourceArn": "arn:aws:sns:*"}}, True),
                              ({"Bool": {"aws:SecureTransport": "true"}}, True)):
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": [{**everyone, "Condition": condition}]}))
        assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"] == {"IsPublic": public}, condition
    for text in ("", "invalid json"):
        assert error(s3.put_bucket_policy, Bucket=bucket, Policy=text)[:3] == (
            "MalformedPolicy", "Policies must be valid JSON and the first byte must be '{'", 400)
    assert error(s3.put_bucket_policy, Bucket=bucket, Policy="{}")[:3] == (
        "MalformedPolicy", "Missing required field Statement", 400)
    assert status(s3.delete_bucket_policy(Bucket=bucket)) == 204
    assert error(s3.get_bucket_policy, Bucket=bucket)[0] == "NoSuchBucketPolicy"
    assert status(s3.delete_bucket_policy(Bucket=bucket)) == 204


def test_encryption_round_trip_answered_on_objects(s3, bucket):
    assert s3.put_object(Bucket=bucket, Key="plain", Body=b"x")["ServerSideEncryption"] == "AES256"
    kms = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "key-1"},
                      "BucketKeyEnabled": True}]}
    assert status(s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=kms)) == 200
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"] == kms
    put = s3.put_object(Bucket=bucket, Key="sealed", Body=b"y")
    assert (put["ServerSideEncryption"], put["SSEKMSKeyId"], put["BucketKeyEnabled"]) == ("aws:kms", "key-1", True)
    head = s3.head_object(Bucket=bucket, Key="sealed")
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "key-1")
    # An object keeps the encryption it was written with.
    assert s3.get_object(Bucket=bucket, Key="plain")["ServerSideEncryption"] == "AES256"
    copied = s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "plain"})
    assert copied["ServerSideEncryption"] == "aws:kms"  # the destination's default, as S3
    upload = s3.create_multipart_upload(Bucket=bucket, Key="multi")
    assert upload["ServerSideEncryption"] == "aws:kms"
    part = s3.upload_part(Bucket=bucket, Key="multi", UploadId=upload["UploadId"], PartNumber=1, Body=b"z")
    done = s3.complete_multipart_upload(Bucket=bucket, Key="multi", UploadId=upload["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert done["ServerSideEncryption"] == "aws:kms"
    assert s3.put_object(Bucket=bucket, Key="asked", Body=b"a", ServerSideEncryption="AES256")[
        "ServerSideEncryption"] == "AES256"
    assert error(s3.put_bucket_encryption, Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": []})[:3] == (
        *MALFORMED, 400)
    two = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}},
                     {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
    assert error(s3.put_bucket_encryption, Bucket=bucket, ServerSideEncryptionConfiguration=two)[:3] == (
        *MALFORMED, 400)
    wrong = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256", "KMSMasterKeyID": "k"}}]}
    code, message, http, err = error(s3.put_bucket_encryption, Bucket=bucket, ServerSideEncryptionConfiguration=wrong)
    assert (code, http, err["ArgumentName"]) == ("InvalidArgument", 400, "ApplyServerSideEncryptionByDefault")
    assert message == "a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms or aws:kms:dsse"
    # Deleting puts the default back, twice as well as once.
    for _ in range(2):
        assert status(s3.delete_bucket_encryption(Bucket=bucket)) == 204
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    for key in ("plain", "sealed", "copy", "multi", "asked"):
        s3.delete_object(Bucket=bucket, Key=key)


def test_public_access_block_round_trip(s3, bucket):
    off = {"BlockPublicAcls": False, "IgnorePublicAcls": False, "BlockPublicPolicy": False,
           "RestrictPublicBuckets": False}
    assert status(s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=off)) == 200
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == off
    # What a request leaves out is off.
    s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={"BlockPublicAcls": True})
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == {**off,
                                                                                            "BlockPublicAcls": True}
    for _ in range(2):
        assert status(s3.delete_public_access_block(Bucket=bucket)) == 204
    assert error(s3.get_public_access_block, Bucket=bucket)[:3] == (
        "NoSuchPublicAccessBlockConfiguration", "The public access block configuration was not found", 404)


def test_tagging_round_trip_and_errors(s3, bucket):
    tags = [{"Key": "tag1", "Value": "tag1"}, {"Key": "tag2", "Value": ""}]
    assert status(s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})) == 204
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == tags
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "tag3", "Value": "tag3"}]})
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "tag3", "Value": "tag3"}]
    code, message, http, err = error(s3.put_bucket_tagging, Bucket=bucket, Tagging={"TagSet": [
        {"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}]})
    assert (code, message, http, err["TagKey"]) == ("InvalidTag", "Cannot provide multiple Tags with the same key",
                                                    400, "a")
    assert error(s3.put_bucket_tagging, Bucket=bucket, Tagging={"TagSet": [{"Key": "aws:x", "Value": "1"}]})[:3] == (
        "InvalidTag", "System tags cannot be added/updated by requester", 400)
    # An empty tag set deletes the tags.
    assert status(s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": []})) == 204
    assert error(s3.get_bucket_tagging, Bucket=bucket)[0] == "NoSuchTagSet"
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    assert status(s3.delete_bucket_tagging(Bucket=bucket)) == 204
    assert error(s3.get_bucket_tagging, Bucket=bucket)[0] == "NoSuchTagSet"


def test_ownership_controls_round_trip_and_errors(s3, unchecked, bucket):
    rules = {"Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    assert status(s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=rules)) == 200
    assert s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"] == rules
    for bad in ({"Rules": [{"ObjectOwnership": "ObjectWriter"}, {"ObjectOwnership": "BucketOwnerPreferred"}]},
                {"Rules": [{"ObjectOwnership": "RandomValue"}]}, {"Rules": [{}]}):
        assert error(unchecked.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls=bad)[:3] == (
            *MALFORMED, 400)
    for _ in range(2):
        assert status(s3.delete_bucket_ownership_controls(Bucket=bucket)) == 204
    assert error(s3.get_bucket_ownership_controls, Bucket=bucket)[:3] == (
        "OwnershipControlsNotFoundError", "The bucket ownership controls were not found", 404)
    # Chosen at creation too.
    name = "own-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name, ObjectOwnership="BucketOwnerPreferred")
    assert s3.get_bucket_ownership_controls(Bucket=name)["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    code, message, http, err = error(s3.create_bucket, Bucket="own-" + uuid.uuid4().hex[:12],
                                     ObjectOwnership="RandomValue")
    assert (code, message, http, err["ArgumentName"]) == (
        "InvalidArgument", "Invalid x-amz-object-ownership header: RandomValue", 400, "x-amz-object-ownership")


def test_versioning_configuration(s3, bucket):
    assert status(s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})) == 200
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    assert error(s3.put_bucket_versioning, Bucket=bucket, VersioningConfiguration={"Status": "enabled"})[:3] == (
        *MALFORMED, 400)
    assert error(s3.put_bucket_versioning, Bucket=bucket, VersioningConfiguration={"Status": "Disabled"})[:3] == (
        *MALFORMED, 400)
    assert error(s3.put_bucket_versioning, Bucket=bucket, VersioningConfiguration={})[:3] == (
        "IllegalVersioningConfigurationException", "The Versioning element must be specified", 400)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"


def test_configurations_go_with_the_bucket(s3, bucket):
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [{"AllowedMethods": ["GET"],
                                                                        "AllowedOrigins": ["*"]}]})
    s3.delete_public_access_block(Bucket=bucket)
    s3.delete_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=bucket)
    assert error(s3.get_bucket_tagging, Bucket=bucket)[0] == "NoSuchTagSet"
    assert error(s3.get_bucket_cors, Bucket=bucket)[0] == "NoSuchCORSConfiguration"
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]["BlockPublicAcls"] is True


def test_configurations_survive_a_restart(tmp_path_factory):
    from conftest import start_server
    proc = start_server(tmp_path_factory)
    try:
        s3 = client_for(proc.url, "s3")
        s3.create_bucket(Bucket="kept")
        s3.put_bucket_tagging(Bucket="kept", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
        proc.kill()  # kill -9 after the 204
        proc.start()
        assert s3.get_bucket_tagging(Bucket="kept")["TagSet"] == [{"Key": "k", "Value": "v"}]
    finally:
        proc.stop()


# ---------------------------------------------------------------------------------------------
# lifecycle rules applied


@pytest.fixture
def in_process(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle_sweep, "SWEEP_INTERVAL_S", 0.1)
    server = InProcessServer(Settings(port=free_port(), data_dir=str(tmp_path / "data"), log_level="warning")).start()
    yield server
    server.stop()


def test_lifecycle_expiration_deletes_expired_objects(in_process, monkeypatch):
    s3 = client_for(in_process.url, "s3")
    s3.create_bucket(Bucket="aging")
    s3.put_bucket_lifecycle_configuration(Bucket="aging", LifecycleConfiguration={"Rules": [
        {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 1},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
        {"ID": "big", "Filter": {"ObjectSizeGreaterThan": 5}, "Status": "Enabled", "Expiration": {"Days": 3}},
        {"ID": "tagged", "Filter": {"Tag": {"Key": "k", "Value": "v"}}, "Status": "Enabled", "Expiration": {"Days": 1}},
        {"ID": "off", "Filter": {"Prefix": "keep/"}, "Status": "Disabled", "Expiration": {"Days": 1}}]})
    for key, data in (("logs/a", b"1"), ("keep/b", b"2"), ("data/big", b"0123456789"), ("data/small", b"3")):
        s3.put_object(Bucket="aging", Key=key, Body=data)
    upload = s3.create_multipart_upload(Bucket="aging", Key="logs/unfinished")["UploadId"]
    # S3 tells when an object will expire, and by which rule: its creation plus the days, rounded
    # up to the next midnight UTC.
    head = s3.head_object(Bucket="aging", Key="logs/a")
    expires = (int(head["LastModified"].timestamp() + 86400) // 86400 + 1) * 86400
    expected = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(expires))
    assert head["Expiration"] == f'expiry-date="{expected}", rule-id="logs"'
    assert 'rule-id="big"' in s3.get_object(Bucket="aging", Key="data/big")["Expiration"]
    assert "Expiration" not in s3.head_object(Bucket="aging", Key="data/small")
    assert 'rule-id="logs"' in s3.put_object(Bucket="aging", Key="logs/c", Body=b"c")["Expiration"]
    store = in_process.edge.objects
    assert lifecycle_sweep.sweep(store) == 0  # nothing is due yet

    def keys():
        return sorted(o["Key"] for o in s3.list_objects_v2(Bucket="aging").get("Contents", []))
    started = time.time()
    monkeypatch.setattr(lifecycle_sweep, "now", lambda: started + 2 * 86400)  # two days later
    wait_for(lambda: keys() == ["data/big", "data/small", "keep/b"])
    wait_for(lambda: not s3.list_multipart_uploads(Bucket="aging").get("Uploads"))
    assert error(s3.list_parts, Bucket="aging", Key="logs/unfinished", UploadId=upload)[0] == "NoSuchUpload"
    monkeypatch.setattr(lifecycle_sweep, "now", lambda: started + 5 * 86400)
    wait_for(lambda: keys() == ["data/small", "keep/b"])


def test_lifecycle_date_rule(in_process, monkeypatch):
    s3 = client_for(in_process.url, "s3")
    s3.create_bucket(Bucket="dated")
    tomorrow = datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=1)
    s3.put_bucket_lifecycle_configuration(Bucket="dated", LifecycleConfiguration={"Rules": [
        {"ID": "d", "Filter": {}, "Status": "Enabled",
         "Expiration": {"Date": datetime.datetime(tomorrow.year, tomorrow.month, tomorrow.day,
                                                  tzinfo=datetime.timezone.utc)}}]})
    s3.put_object(Bucket="dated", Key="x", Body=b"1")
    assert lifecycle_sweep.sweep(in_process.edge.objects) == 0
    monkeypatch.setattr(lifecycle_sweep, "now", lambda: time.time() + 2 * 86400)
    wait_for(lambda: "Contents" not in s3.list_objects_v2(Bucket="dated"))


# ---------------------------------------------------------------------------------------------
# deploy


TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: {bucket}
      VersioningConfiguration: {{Status: Enabled}}
      BucketEncryption:
        ServerSideEncryptionConfiguration:
          - ServerSideEncryptionByDefault: {{SSEAlgorithm: aws:kms, KMSMasterKeyID: alias/my-key}}
            BucketKeyEnabled: true
      PublicAccessBlockConfiguration:
        BlockPublicAcls: true
        BlockPublicPolicy: false
        IgnorePublicAcls: true
        RestrictPublicBuckets: false
      OwnershipControls:
        Rules: [{{ObjectOwnership: BucketOwnerPreferred}}]
      CorsConfiguration:
        CorsRules:
          - AllowedMethods: [GET, PUT]
            AllowedOrigins: ["https://example.com"]
            AllowedHeaders: ["*"]
            ExposedHeaders: [ETag]
            MaxAge: 600
            Id: web
      LifecycleConfiguration:
        Rules:
          - Id: expire-logs
            Status: Enabled
            Prefix: logs/
            ExpirationInDays: 30
            AbortIncompleteMultipartUpload: {{DaysAfterInitiation: 7}}
            NoncurrentVersionExpiration: {{NoncurrentDays: 10}}
          - Id: tagged
            Status: Enabled
            TagFilters: [{{Key: class, Value: scratch}}]
            ObjectSizeGreaterThan: "1024"
            ExpirationDate: "2030-01-01T00:00:00Z"
            Transitions: [{{StorageClass: GLACIER, TransitionInDays: 90}}]
      Tags:
        - {{Key: team, Value: data}}
      NotificationConfiguration:
        QueueConfigurations:
          - Event: s3:ObjectCreated:*
            Queue: !GetAtt Queue.Arn
            Filter: {{S3Key: {{Rules: [{{Name: prefix, Value: uploads/}}]}}}}
  Queue:
    Type: AWS::SQS::Queue
  Policy:
    Type: AWS::S3::BucketPolicy
    Properties:
      Bucket: !Ref Bucket
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: "*"
            Action: s3:GetObject
            Resource: !Sub "${{Bucket.Arn}}/*"
"""

UPDATED = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: {bucket}
      OwnershipControls:
        Rules: [{{ObjectOwnership: ObjectWriter}}]
"""


def run_deploy(capsys, url: str, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--endpoint-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def test_deploy_applies_bucket_configurations_and_update_removes_them(server, s3, tmp_path, capsys):
    bucket, stack = "deployed-" + uuid.uuid4().hex[:10], "cfg-" + uuid.uuid4().hex[:8]
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE.format(bucket=bucket))
    code, out, err = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
    assert code == 0, err
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"] == {"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "alias/my-key"},
         "BucketKeyEnabled": True}]}
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": False, "RestrictPublicBuckets": False}
    assert s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == [{
        "ID": "web", "AllowedHeaders": ["*"], "AllowedMethods": ["GET", "PUT"],
        "AllowedOrigins": ["https://example.com"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}]
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert rules[0] == {"ID": "expire-logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
                        "Expiration": {"Days": 30}, "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                        "NoncurrentVersionExpiration": {"NoncurrentDays": 10}}
    assert rules[1]["Filter"] == {"And": {"Tags": [{"Key": "class", "Value": "scratch"}],
                                          "ObjectSizeGreaterThan": 1024}}
    assert rules[1]["Expiration"] == {"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)}
    assert rules[1]["Transitions"] == [{"Days": 90, "StorageClass": "GLACIER"}]
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "team", "Value": "data"}]
    queues = s3.get_bucket_notification_configuration(Bucket=bucket)["QueueConfigurations"]
    assert [(q["Events"], q["Filter"]) for q in queues] == [
        (["s3:ObjectCreated:*"], {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "uploads/"}]}})]
    policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    assert policy["Statement"][0]["Resource"] == f"arn:aws:s3:::{bucket}/*"
    assert s3.put_object(Bucket=bucket, Key="o", Body=b"1")["ServerSideEncryption"] == "aws:kms"
    s3.delete_object(Bucket=bucket, Key="o")

    # The update drops every configuration but a changed OwnershipControls, and the policy.
    template.write_text(UPDATED.format(bucket=bucket))
    code, out, err = run_deploy(capsys, server.url, str(template), "--stack-name", stack)
    assert code == 0, err
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"  # cannot be turned off
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert error(s3.get_public_access_block, Bucket=bucket)[0] == "NoSuchPublicAccessBlockConfiguration"
    assert s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    assert error(s3.get_bucket_cors, Bucket=bucket)[0] == "NoSuchCORSConfiguration"
    assert error(s3.get_bucket_lifecycle_configuration, Bucket=bucket)[0] == "NoSuchLifecycleConfiguration"
    assert error(s3.get_bucket_tagging, Bucket=bucket)[0] == "NoSuchTagSet"
    assert error(s3.get_bucket_policy, Bucket=bucket)[0] == "NoSuchBucketPolicy"
    assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket=bucket)

    code, out, err = run_deploy(capsys, server.url, "--stack-name", stack, "--delete")
    assert code == 0, err
    assert error(s3.head_bucket, Bucket=bucket)[2] == 404


def test_deploy_refuses_what_it_cannot_apply(server, tmp_path, capsys):
    template = tmp_path / "template.yaml"
    template.write_text("""
Resources:
  Site:
    Type: AWS::S3::Bucket
    Properties:
      WebsiteConfiguration: {IndexDocument: index.html}
""")
    code, out, err = run_deploy(capsys, server.url, str(template), "--stack-name", "refused-" + uuid.uuid4().hex[:6])
    assert code != 0
    assert "property WebsiteConfiguration of AWS::S3::Bucket is not supported by kinesim deploy" in err
