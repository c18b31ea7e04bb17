"""STS through boto3: who the caller is, AssumeRole and GetSessionToken, AWS's refusals (texts of
LocalStack's recordings of AWS, test_sts.py), and the issued credentials at work: accepted by a
`--verify-signatures` server for every service, across a restart, and no longer once expired.
IAM's identities: a user's access key is the user (and signs requests while Active), a role IAM
has is assumed with its RoleId and MaxSessionDuration."""
from __future__ import annotations

import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.store import Store
from kinesim.sts.credentials import IssuedCredentials

ACCOUNT, REGION = "000000000000", "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/deployer"


@pytest.fixture(scope="module")
def sts(server):
    return client_for(server.url, "sts")


def error(e: pytest.ExceptionInfo) -> tuple[str, str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


def client_with(url: str, service: str, credentials: dict, **config) -> object:
    return boto3.client(service, endpoint_url=url, region_name=REGION,
                        aws_access_key_id=credentials["AccessKeyId"],
                        aws_secret_access_key=credentials["SecretAccessKey"],
                        aws_session_token=credentials.get("SessionToken"),
                        config=Config(retries={"max_attempts": 1}, **config))


def test_caller_identity_of_the_account(sts):
    answer = sts.get_caller_identity()
    assert (answer["Account"], answer["Arn"], answer["UserId"]) == (ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root", ACCOUNT)


def test_assume_role_and_the_identity_it_gives(server, sts):
    answer = sts.assume_role(RoleArn=ROLE, RoleSessionName="ci-run")
    creds, user = answer["Credentials"], answer["AssumedRoleUser"]
    assert creds["AccessKeyId"].startswith("ASIA") and len(creds["AccessKeyId"]) == 20
    assert creds["SecretAccessKey"] and creds["SessionToken"]
    assert user["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/deployer/ci-run"
    role_id, session = user["AssumedRoleId"].split(":")
    assert role_id.startswith("AROA") and len(role_id) == 21 and session == "ci-run"
    assert "PackedPolicySize" not in answer  # AWS sends it only for session policies and tags
    assert 3500 < creds["Expiration"].timestamp() - time.time() <= 3600  # an hour, by default
    assumed = client_with(server.url, "sts", creds)
    identity = assumed.get_caller_identity()
    assert (identity["Arn"], identity["UserId"], identity["Account"]) == (user["Arn"], user["AssumedRoleId"], ACCOUNT)
    # The same role's id is the same for every session.
    again = sts.assume_role(RoleArn=ROLE, RoleSessionName="other")["AssumedRoleUser"]["AssumedRoleId"]
    assert again == f"{role_id}:other"
    # A role of another account: credentials of that account.
    other = sts.assume_role(RoleArn="arn:aws:iam::123456789012:role/x/y/z", RoleSessionName="s1")
    assert other["AssumedRoleUser"]["Arn"] == "arn:aws:sts::123456789012:assumed-role/z/s1"
    assert client_with(server.url, "sts", other["Credentials"]).get_caller_identity()["Account"] == "123456789012"
    assert sts.get_access_key_info(AccessKeyId=other["Credentials"]["AccessKeyId"])["Account"] == "123456789012"


def test_session_policies_and_tags(sts):
    answer = sts.assume_role(RoleArn=ROLE, RoleSessionName="tagged", Tags=[{"Key": "team", "Value": "data"}],
                             Policy='{"Version": "2012-10-17", "Statement": []}', SourceIdentity="alice")
    assert 0 < answer["PackedPolicySize"] <= 100 and answer["SourceIdentity"] == "alice"
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=ROLE, RoleSessionName="dup", Tags=[{"Key": "A", "Value": "1"},
                                                                   {"Key": "a", "Value": "2"}])
    assert error(e) == ("InvalidParameterValue", "Duplicate tag keys found. Please note that Tag keys are case "
                                                 "insensitive.", 400)
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=ROLE, RoleSessionName="trans", Tags=[{"Key": "a", "Value": "1"}],
                        TransitiveTagKeys=["b"])
    assert error(e)[:2] == ("InvalidParameterValue", "The specified transitive tag key must be included in the "
                                                     "requested tags.")
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=ROLE, RoleSessionName="bad-policy", Policy="{not json")
    assert error(e)[0] == "MalformedPolicyDocument"


@pytest.mark.parametrize("arn", ["nothing-valid-in-here", "arn::b:::something/test-role",
                                 "arn:a::::something/test-role", "arn:a:::something/test-role",
                                 "arn:a:a::aaaaaaaaaa:"])
def test_invalid_role_arns(server, arn):
    sts = client_for(server.url, "sts", parameter_validation=False)
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=arn, RoleSessionName="Session1")
    assert error(e) == ("ValidationError", f"{arn} is invalid", 400)
    assert e.value.response["Error"]["Type"] == "Sender"


def test_invalid_session_name_and_duration(server):
    sts = client_for(server.url, "sts", parameter_validation=False)
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn="arn:a:b:::something/test-role", RoleSessionName="Session1:2")
    assert error(e) == ("ValidationError", "1 validation error detected: Value 'Session1:2' at 'roleSessionName' "
                                           "failed to satisfy constraint: Member must satisfy regular expression "
                                           "pattern: [\\w+=,.@-]*", 400)
    for duration, bound in ((899, "greater than or equal to 900"), (43201, "less than or equal to 43200")):
        with pytest.raises(ClientError) as e:
            sts.assume_role(RoleArn=ROLE, RoleSessionName="s1", DurationSeconds=duration)
        assert error(e)[:2] == ("ValidationError", f"1 validation error detected: Value '{duration}' at "
                                                   f"'durationSeconds' failed to satisfy constraint: Member must "
                                                   f"have value {bound}")
    assert sts.assume_role(RoleArn=ROLE, RoleSessionName="s1", DurationSeconds=43200)["Credentials"]


def test_role_chaining_and_session_tokens(server, sts):
    first = sts.assume_role(RoleArn=ROLE, RoleSessionName="first")["Credentials"]
    chained = client_with(server.url, "sts", first)
    with pytest.raises(ClientError) as e:
        chained.assume_role(RoleArn=ROLE, RoleSessionName="second", DurationSeconds=7200)
    assert error(e)[:2] == ("ValidationError", "The requested DurationSeconds exceeds the 1 hour session limit for "
                                               "roles assumed by role chaining.")
    second = chained.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/next", RoleSessionName="second")
    assert second["AssumedRoleUser"]["Arn"].endswith(":assumed-role/next/second")
    with pytest.raises(ClientError) as e:
        chained.get_session_token()
    assert error(e) == ("AccessDenied", "Cannot call GetSessionToken with session credentials", 403)
    token = sts.get_session_token(DurationSeconds=900)["Credentials"]
    assert token["AccessKeyId"].startswith("ASIA")
    assert client_with(server.url, "sts", token).get_caller_identity()["Arn"] == f"arn:aws:iam::{ACCOUNT}:root"


def test_actions_kinesim_lacks(sts):
    with pytest.raises(ClientError) as e:
        sts.get_federation_token(Name="fed")
    code, message, status = error(e)
    assert (code, status) == ("NotImplemented", 501) and "GetFederationToken" in message


@pytest.fixture(scope="module")
def verifying(tmp_path_factory):
    """A server of the module's own that checks signatures (AKIDROOT:root-secret configured)."""
    proc = start_server(tmp_path_factory, verify_signatures=True, credentials=["AKIDROOT:root-secret"])
    yield proc
    proc.stop()


def test_issued_credentials_are_accepted_when_signatures_are_verified(verifying):
    proc = verifying
    root = {"AccessKeyId": "AKIDROOT", "SecretAccessKey": "root-secret"}
    creds = client_with(proc.url, "sts", root).assume_role(RoleArn=ROLE, RoleSessionName="cdk")["Credentials"]
    for service in ("kinesis", "ssm", "sns", "sqs"):  # JSON and query protocols
        client = client_with(proc.url, service, creds)
        {"kinesis": lambda: client.list_streams(), "ssm": lambda: client.describe_parameters(),
         "sns": lambda: client.list_topics(), "sqs": lambda: client.list_queues()}[service]()
    s3 = client_with(proc.url, "s3", creds, s3={"addressing_style": "path"})
    s3.create_bucket(Bucket="assumed-bucket")
    assert client_with(proc.url, "ssm", creds).put_parameter(Name="p", Value="v", Type="String")["Version"] == 1
    # A wrong secret for an issued key is refused, as any other.
    with pytest.raises(ClientError) as e:
        client_with(proc.url, "ssm", {**creds, "SecretAccessKey": "wrong"}).describe_parameters()
    assert error(e)[0] == "InvalidSignatureException"
    proc.kill()
    proc.start()  # issued credentials are kept until they expire
    assert client_with(proc.url, "sts", creds).get_caller_identity()["Arn"] == \
        f"arn:aws:sts::{ACCOUNT}:assumed-role/deployer/cdk"
    assert client_with(proc.url, "ssm", creds).get_parameter(Name="p")["Parameter"]["Value"] == "v"
    with pytest.raises(ClientError) as e:
        client_with(proc.url, "ssm", {"AccessKeyId": "ASIANEVERISSUED0000", "SecretAccessKey": "x"}) \
            .describe_parameters()
    assert error(e)[0] == "UnrecognizedClientException"


def test_expired_credentials_are_forgotten(tmp_path):
    now = [1_000_000.0]
    store = Store(str(tmp_path))
    try:
        issued = IssuedCredentials(store, clock=lambda: now[0])
        identity = {"UserId": ACCOUNT, "Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:root"}
        short = issued.issue(identity, 900)
        long = issued.issue(identity, 3600)
        assert issued[short["AccessKeyId"]] == short["SecretAccessKey"] and len(issued) == 2
        now[0] += 901
        assert short["AccessKeyId"] not in issued and issued.lookup(short["AccessKeyId"]) is None
        assert list(issued) == [long["AccessKeyId"]]
        # A new server forgets what expired while it was down, and drops it from the store.
        reopened = IssuedCredentials(store, clock=lambda: now[0])
        assert list(reopened) == [long["AccessKeyId"]]
        assert set(store.documents("sts-credentials")) == {long["AccessKeyId"]}
    finally:
        store.close()


def test_an_error_quoting_what_xml_cannot_carry_is_still_xml(server):
    # The validation message quotes the value: with a NUL in it the answer was no XML document, and
    # boto3 read no error code ("Unable to parse response"). The NUL is answered as U+FFFD.
    sts = client_for(server.url, "sts", parameter_validation=False)
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=ROLE, RoleSessionName="bad\x00name")
    assert error(e) == ("ValidationError", "1 validation error detected: Value 'bad\ufffdname' at 'roleSessionName' "
                                           "failed to satisfy constraint: Member must satisfy regular expression "
                                           "pattern: [\\w+=,.@-]*", 400)


# IAM's users and roles: the identities STS answers for them


def _iam_user_with_key(iam, prefix: str) -> tuple[dict, dict]:
    import uuid
    user = iam.create_user(UserName=f"{prefix}-{uuid.uuid4().hex[:8]}", Path="/people/")["User"]
    return user, iam.create_access_key(UserName=user["UserName"])["AccessKey"]


def test_an_iam_users_key_is_the_user(server, sts):
    iam = client_for(server.url, "iam")
    user, key = _iam_user_with_key(iam, "caller")
    as_user = client_with(server.url, "sts", key)
    identity = as_user.get_caller_identity()
    assert (identity["Arn"], identity["UserId"], identity["Account"]) == (user["Arn"], user["UserId"], ACCOUNT)
    assert identity["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/people/{user['UserName']}"
    assert identity["UserId"].startswith("AIDA")
    # The user's session credentials are the user's too.
    session = as_user.get_session_token(DurationSeconds=900)["Credentials"]
    assert client_with(server.url, "sts", session).get_caller_identity()["Arn"] == user["Arn"]
    assert sts.get_access_key_info(AccessKeyId=key["AccessKeyId"])["Account"] == ACCOUNT


def test_assuming_a_role_iam_has(server, sts):
    import json
    import uuid
    iam = client_for(server.url, "iam")
    name = f"assumable-{uuid.uuid4().hex[:8]}"
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT},
                                                     "Action": "sts:AssumeRole"}]}
    role = iam.create_role(RoleName=name, Path="/app/", AssumeRolePolicyDocument=json.dumps(trust),
                           MaxSessionDuration=7200)["Role"]
    answer = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="build-7", DurationSeconds=7200)
    user = answer["AssumedRoleUser"]
    # LocalStack's recording of AWS (test_assume_role): "<role-id>:<session>", no path in the ARN.
    assert user == {"AssumedRoleId": f"{role['RoleId']}:build-7",
                    "Arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/build-7"}
    identity = client_with(server.url, "sts", answer["Credentials"]).get_caller_identity()
    assert (identity["Arn"], identity["UserId"]) == (user["Arn"], user["AssumedRoleId"])
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=role["Arn"], RoleSessionName="long", DurationSeconds=7201)
    assert error(e) == ("ValidationError", "The requested DurationSeconds exceeds the MaxSessionDuration set for "
                                           "this role.", 400)
    # Not the role under another path: a role IAM lacks, assumed as before (an id of its ARN).
    elsewhere = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="s2")
    assert not elsewhere["AssumedRoleUser"]["AssumedRoleId"].startswith(role["RoleId"])


def test_iam_access_keys_sign_requests_when_signatures_are_verified(verifying):
    proc = verifying
    root = {"AccessKeyId": "AKIDROOT", "SecretAccessKey": "root-secret"}
    iam = client_with(proc.url, "iam", root)
    user, key = _iam_user_with_key(iam, "signer")
    assert client_with(proc.url, "sts", key).get_caller_identity()["Arn"] == user["Arn"]
    client_with(proc.url, "kinesis", key).list_streams()
    client_with(proc.url, "s3", key, s3={"addressing_style": "path"}).create_bucket(Bucket="iam-user-bucket")
    assert client_with(proc.url, "iam", key).get_user(UserName=user["UserName"])["User"]["UserId"] == \
        user["UserId"]
    with pytest.raises(ClientError) as e:
        client_with(proc.url, "sts", {**key, "SecretAccessKey": "wrong"}).get_caller_identity()
    assert error(e)[0::2] == ("SignatureDoesNotMatch", 403)

    def refusals() -> list[tuple[str, str, int]]:
        out = []
        for service, call in (("sts", lambda c: c.get_caller_identity()), ("iam", lambda c: c.list_users()),
                              ("kinesis", lambda c: c.list_streams()), ("s3", lambda c: c.list_buckets())):
            with pytest.raises(ClientError) as e:
                call(client_with(proc.url, service, key, s3={"addressing_style": "path"}))
            out.append(error(e))
        return out

    # AWS's answers to a key it does not take: an Inactive one and a deleted one alike.
    unknown = [("InvalidClientTokenId", "The security token included in the request is invalid.", 403)] * 2 + [
        ("UnrecognizedClientException", "The security token included in the request is invalid.", 400),
        ("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", 403)]
    iam.update_access_key(UserName=user["UserName"], AccessKeyId=key["AccessKeyId"], Status="Inactive")
    assert refusals() == unknown
    iam.update_access_key(UserName=user["UserName"], AccessKeyId=key["AccessKeyId"], Status="Active")
    assert client_with(proc.url, "sts", key).get_caller_identity()["UserId"] == user["UserId"]
    iam.delete_access_key(UserName=user["UserName"], AccessKeyId=key["AccessKeyId"])
    assert refusals() == unknown
