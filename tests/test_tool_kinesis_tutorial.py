"""AWS's tutorial "Using Lambda with Kinesis Data Streams" (Lambda developer guide,
with-kinesis-example), run as written with the AWS CLI v2 against kinesim, clean-up included.

The tutorial's steps, each with its own command: the execution role lambda-kinesis-role (the
console's "Trusted entity: AWS Lambda, Permissions: AWSLambdaKinesisExecutionRole" as `aws iam
create-role` + `attach-role-policy`), the function ProcessKinesisRecords from the tutorial's
JavaScript sample (AWS's serverless snippet integration-kinesis-to-lambda/example.js) in index.js,
zipped, `create-function` with the role's ARN from create-role's answer, `invoke` with the
tutorial's sample Kinesis event (input.txt), `kinesis create-stream` + `describe-stream` for the
stream's ARN, `create-event-source-mapping ... --starting-position LATEST` and
`list-event-source-mappings` (the tutorial's abbreviated `--event-source` included), `put-record`
of "Hello, this is a test.", the function's output read back from CloudWatch Logs, then the
clean-up in the tutorial's order: the role, the function, the stream; the mapping, which outlives
its function on AWS (DeleteFunction leaves event source mappings), is found and deleted after. The
only additions to the tutorial's commands are `--endpoint-url` (the CLI 2.9 of Debian 12 does not
read AWS_ENDPOINT_URL) and the account's ARNs instead of the tutorial's 111122223333.

Runtime: the tutorial's text as found (the 2023-24 page; the live page was out of reach) says
nodejs18.x, which AWS has deprecated (no new functions) and whose Node.js is not installed here;
nodejs22.x runs the same CommonJS handler.
"""
from __future__ import annotations

import json
import subprocess
import time
import zipfile

import pytest

from kinesim.functions import runtimes
from tool_setup import APT_TIMEOUT_S, aws_cli_v2, run_tool, server_info, tool_env

# Installing the CLI (apt-get update + install, each bounded) the first time, then under a minute.
pytestmark = pytest.mark.timeout(2 * APT_TIMEOUT_S + 300)

FUNCTION = "ProcessKinesisRecords"
ROLE = "lambda-kinesis-role"
STREAM = "lambda-stream"
POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AWSLambdaKinesisExecutionRole"
LOG_GROUP = f"/aws/lambda/{FUNCTION}"

# The console's "Trusted entity: AWS Lambda" (the Lambda guide's lambda-intro-execution-role).
TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {
                "Service": "lambda.amazonaws.com"
            },
            "Action": "sts:AssumeRole"
        }
    ]
}

# The tutorial's JavaScript sample, "Consuming a Kinesis event with Lambda using JavaScript".
INDEX_JS = """\
// Copyright Amazon.com, Inc. or its affiliates. All Rights Reserved.
// SPDX-License-Identifier: Apache-2.0
exports.handler = async (event, context) => {
  for (const record of event.Records) {
    try {
      console.log(`Processed Kinesis Event - EventID: ${record.eventID}`);
      const recordData = await getRecordDataAsync(record.kinesis);
      console.log(`Record Data: ${recordData}`);
      // TODO: Do interesting work based on the new data
    } catch (err) {
      console.error(`An error occurred ${err}`);
      throw err;
    }
  }
  console.log(`Successfully processed ${event.Records.length} records.`);
};

async function getRecordDataAsync(payload) {
  var data = Buffer.from(payload.data, "base64").toString("utf-8");
  await Promise.resolve(1); //Placeholder for actual async work
  return data;
}
"""

# The tutorial's input.txt.
INPUT_TXT = """\
{
    "Records": [
        {
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": "1",
                "sequenceNumber": "49590338271490256608559692538361571095921575989136588898",
                "data": "SGVsbG8sIHRoaXMgaXMgYSB0ZXN0Lg==",
                "approximateArrivalTimestamp": 1545084650.987
            },
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": "shardId-000000000006:49590338271490256608559692538361571095921575989136588898",
            "eventName": "aws:kinesis:record",
            "invokeIdentityArn": "arn:aws:iam::111122223333:role/lambda-kinesis-role",
            "awsRegion": "us-east-2",
            "eventSourceARN": "arn:aws:kinesis:us-east-2:111122223333:stream/lambda-stream"
        }
    ]
}
"""


@pytest.fixture(scope="module")
def node22() -> None:
    """Node.js 22 for nodejs22.x: `make setup` puts it in the node cache; else from the npm registry."""
    if 22 in runtimes.installed_node_majors():
        return
    try:
        runtimes.install(22, quiet=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:  # no npm, or the registry out of reach
        pytest.skip(f"nodejs22.x cannot run here: {e}")


@pytest.fixture(scope="module")
def env(tool_server, tmp_path_factory) -> dict[str, str]:
    return tool_env(tool_server.url, tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def aws(env) -> str:
    return aws_cli_v2(env)


def until(what: str, predicate, timeout: float = 90.0, interval: float = 0.5):
    """predicate()'s first true value; fails naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not in {timeout:.0f}s"
        time.sleep(interval)


def test_the_tutorial_as_written(tool_server, env, aws, node22, tmp_path):
    account = server_info(tool_server.url)["account_id"]
    region = env["AWS_DEFAULT_REGION"]
    work = tmp_path / "kinesis-tutorial"
    work.mkdir()

    def cli(*args: str, expect: int | None = 0):
        return run_tool([aws, "--endpoint-url", tool_server.url, *args], env, cwd=work, timeout=120,
                        expect=expect)

    def answer(*args: str) -> dict:
        return json.loads(cli(*args).stdout)

    # Create the execution role.
    (work / "trust-policy.json").write_text(json.dumps(TRUST_POLICY, indent=2))
    role = answer("iam", "create-role", "--role-name", ROLE,
                  "--assume-role-policy-document", "file://trust-policy.json")["Role"]
    role_arn = role["Arn"]
    assert role_arn == f"arn:aws:iam::{account}:role/{ROLE}", role
    assert role["RoleName"] == ROLE and role["Path"] == "/" and role["RoleId"].startswith("AROA"), role
    assert role["AssumeRolePolicyDocument"] == TRUST_POLICY, role
    res = cli("iam", "attach-role-policy", "--role-name", ROLE, "--policy-arn", POLICY_ARN)
    assert res.stdout == "", res.stdout
    attached = answer("iam", "list-attached-role-policies", "--role-name", ROLE)["AttachedPolicies"]
    assert attached == [{"PolicyName": "AWSLambdaKinesisExecutionRole", "PolicyArn": POLICY_ARN}]

    # Create the function: index.js, `zip function.zip index.js`, create-function.
    (work / "index.js").write_text(INDEX_JS)
    with zipfile.ZipFile(work / "function.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.write(work / "index.js", "index.js")
    function = answer("lambda", "create-function", "--function-name", FUNCTION,
                      "--zip-file", "fileb://function.zip", "--handler", "index.handler", "--runtime", "nodejs22.x",
                      "--role", role_arn)
    assert function["FunctionArn"] == f"arn:aws:lambda:{region}:{account}:function:{FUNCTION}", function
    assert (function["Runtime"], function["Handler"], function["Role"]) == ("nodejs22.x", "index.handler", role_arn)
    assert function["State"] in ("Pending", "Active"), function

    # Test the Lambda function with the sample event.
    (work / "input.txt").write_text(INPUT_TXT)
    invoked = answer("lambda", "invoke", "--function-name", FUNCTION, "--cli-binary-format", "raw-in-base64-out",
                     "--payload", "file://input.txt", "outputfile.txt")
    assert invoked == {"StatusCode": 200, "ExecutedVersion": "$LATEST"}, invoked
    assert (work / "outputfile.txt").read_text() == "null"  # the async handler returns nothing

    # Create a Kinesis stream; its ARN from describe-stream.
    res = cli("kinesis", "create-stream", "--stream-name", STREAM, "--shard-count", "1")
    assert res.stdout == "", res.stdout
    def active() -> dict | None:
        described = answer("kinesis", "describe-stream", "--stream-name", STREAM)["StreamDescription"]
        return described if described["StreamStatus"] == "ACTIVE" else None

    stream = until("the stream ACTIVE", active)
    stream_arn = stream["StreamARN"]
    assert stream_arn == f"arn:aws:kinesis:{region}:{account}:stream/{STREAM}", stream
    assert len(stream["Shards"]) == 1 and stream["KeyId"] is None and stream["EncryptionType"] == "NONE", stream

    # Add an event source in Lambda.
    mapping = answer("lambda", "create-event-source-mapping", "--function-name", FUNCTION,
                     "--event-source", stream_arn, "--batch-size", "100", "--starting-position", "LATEST")
    uuid = mapping["UUID"]
    assert (mapping["State"], mapping["StateTransitionReason"]) == ("Creating", "User action"), mapping
    assert (mapping["EventSourceArn"], mapping["FunctionArn"]) == (stream_arn, function["FunctionArn"]), mapping
    assert (mapping["BatchSize"], mapping["StartingPosition"]) == (100, "LATEST"), mapping

    def listed(key: str, value: str) -> list[dict] | None:
        found = answer("lambda", "list-event-source-mappings", "--function-name", FUNCTION,
                       "--event-source", stream_arn)["EventSourceMappings"]
        return found if found and found[0][key] == value else None

    # "In the response, you can verify the status value is enabled."
    (enabled,) = until("the mapping Enabled", lambda: listed("State", "Enabled"))
    assert enabled["UUID"] == uuid and enabled["LastProcessingResult"] == "No records processed", enabled

    # Test the setup: a record, then what the function logged for it.
    put = answer("kinesis", "put-record", "--cli-binary-format", "raw-in-base64-out", "--stream-name", STREAM,
                 "--partition-key", "1", "--data", "Hello, this is a test.")
    assert put["ShardId"] == "shardId-000000000000", put
    event_line = f"Processed Kinesis Event - EventID: shardId-000000000000:{put['SequenceNumber']}"

    def logged() -> list[str]:
        events = answer("logs", "filter-log-events", "--log-group-name", LOG_GROUP)["events"]
        return [e["message"] for e in events]

    def batch_logged() -> list[str] | None:
        messages = logged()
        first = next((i for i, m in enumerate(messages) if event_line in m), None)
        done = first is not None and any(m.startswith("REPORT RequestId: ") for m in messages[first:])
        return messages if done else None

    messages = until("the record's batch in the function's log", batch_logged)
    # The invoke's lines first (its sample event), then the batch's; each a START..REPORT block.
    request_ids = [m.split()[2] for m in messages if m.startswith("START RequestId: ")]
    assert len(request_ids) == 2, messages
    batch = [m for m in messages if request_ids[1] in m]
    assert batch[0] == f"START RequestId: {request_ids[1]} Version: $LATEST\n", batch
    lines = [m.split("\t", 3)[2:] for m in batch[1:4]]
    assert lines == [["INFO", event_line + "\n"], ["INFO", "Record Data: Hello, this is a test.\n"],
                     ["INFO", "Successfully processed 1 records.\n"]], batch
    assert batch[4] == f"END RequestId: {request_ids[1]}\n", batch
    assert batch[5].startswith(f"REPORT RequestId: {request_ids[1]}\tDuration: "), batch
    assert any("Record Data: Hello, this is a test." in m and request_ids[0] in m for m in messages), messages
    (done,) = until("the batch's result on the mapping", lambda: listed("LastProcessingResult", "OK"))
    assert done["State"] == "Enabled", done

    # Clean up, in the tutorial's order: the execution role, the function, the stream. The console
    # detaches the role's policies for you; the API refuses a role that has any.
    refused = cli("iam", "delete-role", "--role-name", ROLE, expect=254)
    assert "(DeleteConflict) when calling the DeleteRole operation: Cannot delete entity, must detach all policies " \
        "first." in refused.stderr, refused.stderr
    res = cli("iam", "detach-role-policy", "--role-name", ROLE, "--policy-arn", POLICY_ARN)
    assert res.stdout == "", res.stdout
    assert cli("iam", "delete-role", "--role-name", ROLE).stdout == ""
    gone = cli("iam", "get-role", "--role-name", ROLE, expect=254)
    assert f"(NoSuchEntity) when calling the GetRole operation: The role with name {ROLE} cannot be found." \
        in gone.stderr, gone.stderr

    assert cli("lambda", "delete-function", "--function-name", FUNCTION).stdout == ""
    gone = cli("lambda", "get-function", "--function-name", FUNCTION, expect=254)
    assert "(ResourceNotFoundException) when calling the GetFunction operation: Function not found: " \
        f"{function['FunctionArn']}" in gone.stderr, gone.stderr

    def failing(*args: str):
        res = cli(*args, expect=None)
        return res if res.returncode == 254 else None

    assert cli("kinesis", "delete-stream", "--stream-name", STREAM).stdout == ""
    gone = until("the stream gone", lambda: failing("kinesis", "describe-stream", "--stream-name", STREAM))
    assert f"(ResourceNotFoundException) when calling the DescribeStream operation: Stream {STREAM} under account " \
        f"{account} not found." in gone.stderr, gone.stderr

    # The mapping outlives its function (as on AWS): listed still, then deleted.
    left = answer("lambda", "list-event-source-mappings", "--event-source-arn", stream_arn)["EventSourceMappings"]
    assert [m["UUID"] for m in left] == [uuid], left
    deleting = answer("lambda", "delete-event-source-mapping", "--uuid", uuid)
    assert (deleting["UUID"], deleting["State"]) == (uuid, "Deleting"), deleting
    gone = until("the mapping gone", lambda: failing("lambda", "get-event-source-mapping", "--uuid", uuid))
    assert "(ResourceNotFoundException) when calling the GetEventSourceMapping operation: The resource you " \
        "requested does not exist." in gone.stderr, gone.stderr

    # What the function logged stays after the function (as on AWS) until its log group goes.
    groups = answer("logs", "describe-log-groups", "--log-group-name-prefix", LOG_GROUP)["logGroups"]
    assert [g["logGroupName"] for g in groups] == [LOG_GROUP], groups
    assert cli("logs", "delete-log-group", "--log-group-name", LOG_GROUP).stdout == ""
    assert answer("logs", "describe-log-groups", "--log-group-name-prefix", LOG_GROUP)["logGroups"] == []
