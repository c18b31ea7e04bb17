"""`kinesim deploy` of SNS templates: a topic fanning out to a Firehose delivery stream (the shape
of the public "SNS to Firehose to S3" pattern), an inline `Subscription` to a function, a topic
policy; updated in place and deleted. Checked through boto3, as a user would."""
from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid

from kinesim.deploy import cli

from conftest import client_for

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Raw:
    Type: String
    Default: "true"
  SeenFile:
    Type: String
Resources:
  Bucket:
    Type: AWS::S3::Bucket
  DeliveryRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {Version: "2012-10-17", Statement: []}
  DeliveryStream:
    Type: AWS::KinesisFirehose::DeliveryStream
    Properties:
      DeliveryStreamType: DirectPut
      ExtendedS3DestinationConfiguration:
        BucketARN: !GetAtt Bucket.Arn
        RoleARN: !GetAtt DeliveryRole.Arn
        BufferingHints: {IntervalInSeconds: 0, SizeInMBs: 1}
  SnsRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {Version: "2012-10-17", Statement: []}
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      TopicName: !Sub "${AWS::StackName}-events"
      DisplayName: Events
      Tags: [{Key: team, Value: data}]
  ToFirehose:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref Topic
      Protocol: firehose
      Endpoint: !GetAtt DeliveryStream.Arn
      SubscriptionRoleArn: !GetAtt SnsRole.Arn
      RawMessageDelivery: !Ref Raw
  TopicPolicy:
    Type: AWS::SNS::TopicPolicy
    Properties:
      Topics: [!Ref Topic]
      PolicyDocument: {Version: "2012-10-17", Statement: []}
  Recorder:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt DeliveryRole.Arn
      Environment: {Variables: {SEEN_FILE: !Ref SeenFile}}
      Code:
        ZipFile: |
          import json, os
          def handler(event, context):
              with open(os.environ["SEEN_FILE"], "a") as f:
                  f.write(json.dumps(event) + "\\n")
  Alerts:
    Type: AWS::SNS::Topic
    Properties:
      Subscription:
        - Protocol: lambda
          Endpoint: !GetAtt Recorder.Arn
Outputs:
  TopicArn:
    Value: !Ref Topic
  AlertsArn:
    Value: !Ref Alerts
  BucketName:
    Value: !Ref Bucket
"""


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def lines_in(s3, bucket: str) -> list[str]:
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    return b"".join(s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys).decode().splitlines()


def deploy(capsys, url: str, *args: str) -> tuple[int, dict[str, str], str]:
    code = cli.main([*args, "--endpoint-url", url])
    out, err = capsys.readouterr()
    actions = {w[1]: w[0] for w in (line.split() for line in out.splitlines())
               if len(w) >= 4 and w[2].startswith("AWS::")}
    return code, actions, out + err


def outputs(url: str, stack: str) -> dict[str, str]:
    with urllib.request.urlopen(f"{url}/_kinesim/stacks/{stack}") as response:
            return {k: v["OutputValue"] for k, v in json.loads(response.read())["Outputs"].items()}


def test_topic_with_firehose_and_inline_lambda_subscriptions_deploys_runs_updates_and_deletes(server, tmp_path,
                                                                                               capsys):
    sns = client_for(server.url, "sns")
    s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
    stack = "sns" + uuid.uuid4().hex[:8]
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE)
    seen = tmp_path / "seen.jsonl"
    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack,
                                "--parameter-overrides", f"SeenFile={seen}")
    assert code == 0, log
    assert actions["Topic"] == actions["ToFirehose"] == actions["Alerts"] == "created"
    assert actions["TopicPolicy"] == "ignored"
    out = outputs(server.url, stack)
    topic_arn, alerts_arn, bucket = out["TopicArn"], out["AlertsArn"], out["BucketName"]
    assert topic_arn.endswith(f":{stack}-events")
    assert sns.get_topic_attributes(TopicArn=topic_arn)["Attributes"]["DisplayName"] == "Events"
    assert sns.list_tags_for_resource(ResourceArn=topic_arn)["Tags"] == [{"Key": "team", "Value": "data"}]
    [sub] = sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"]
    assert sub["Protocol"] == "firehose"
    assert sns.get_subscription_attributes(SubscriptionArn=sub["SubscriptionArn"])["Attributes"][
        "RawMessageDelivery"] == "true"

    sns.publish(TopicArn=topic_arn, Message="raw line")
    assert wait_until(lambda: lines_in(s3, bucket), what="the raw record in S3") == ["raw line"]
    sns.publish(TopicArn=alerts_arn, Message="alert")
    event = wait_until(lambda: os.path.exists(seen) and seen.read_text(), what="the function's event")
    assert json.loads(event)["Records"][0]["Sns"]["Message"] == "alert"

    # RawMessageDelivery off: the subscription is updated in place; the stream then gets envelopes.
    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack,
                                "--parameter-overrides", f"SeenFile={seen}", "Raw=false")
    assert code == 0, log
    assert actions["ToFirehose"] == "updated" and actions["Topic"] == "unchanged"
    assert sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"][0]["SubscriptionArn"] == \
        sub["SubscriptionArn"]
    sns.publish(TopicArn=topic_arn, Message="wrapped")
    envelope = wait_until(lambda: [line for line in lines_in(s3, bucket) if line.startswith("{")],
                          what="the enveloped record")
    assert json.loads(envelope[0])["Message"] == "wrapped"

    for key in [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]:
        s3.delete_object(Bucket=bucket, Key=key)  # CloudFormation deletes empty buckets only
    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack, "--delete")
    assert code == 0, log
    listed = [t["TopicArn"] for p in sns.get_paginator("list_topics").paginate() for t in p["Topics"]]
    assert topic_arn not in listed and alerts_arn not in listed
