"""`kinesim deploy` of SQS templates: a queue with a dead-letter queue (RedrivePolicy from
`Fn::GetAtt DLQ.Arn`), a FIFO queue with a generated name, a queue policy; updated in place and
deleted. Checked through boto3, as a user would."""
from __future__ import annotations

import json
import urllib.request
import uuid

from kinesim.deploy import cli

from conftest import client_for

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Visibility:
    Type: Number
    Default: 45
Resources:
  DeadLetters:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 1209600
  Work:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-work"
      VisibilityTimeout: !Ref Visibility
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt DeadLetters.Arn
        maxReceiveCount: 3
      Tags: [{Key: team, Value: data}]
  Ordered:
    Type: AWS::SQS::Queue
    Properties:
      FifoQueue: true
      ContentBasedDeduplication: true
  Policy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref Work]
      PolicyDocument: {Version: "2012-10-17", Statement: []}
Outputs:
  WorkUrl:
    Value: !Ref Work
  WorkName:
    Value: !GetAtt Work.QueueName
  DeadLettersArn:
    Value: !GetAtt DeadLetters.Arn
  OrderedUrl:
    Value: !GetAtt Ordered.QueueUrl
"""


def deploy(capsys, url: str, *args: str) -> tuple[int, dict[str, str], str]:
    code = cli.main([*args, "--endpoint-url", url])
    out, err = capsys.readouterr()
    actions = {w[1]: w[0] for w in (line.split() for line in out.splitlines()) if len(w) >= 4 and w[2].startswith("AWS::")}
    return code, actions, out + err


def outputs(url: str, stack: str) -> dict[str, str]:
    with urllib.request.urlopen(f"{url}/_kinesim/stacks/{stack}") as response:
        return {k: v["OutputValue"] for k, v in json.loads(response.read())["Outputs"].items()}


def test_queues_with_dead_letter_queue_deploy_update_and_delete(server, tmp_path, capsys):
    sqs = client_for(server.url, "sqs")
    stack = "sqs" + uuid.uuid4().hex[:8]
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE)
    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack)
    assert code == 0, log
    assert actions["Work"] == actions["DeadLetters"] == actions["Ordered"] == "created"
    assert actions["Policy"] == "ignored"
    out = outputs(server.url, stack)
    work, dlq_arn, ordered = out["WorkUrl"], out["DeadLettersArn"], out["OrderedUrl"]
    assert work == sqs.get_queue_url(QueueName=f"{stack}-work")["QueueUrl"] and out["WorkName"] == f"{stack}-work"
    attrs = sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "45"
    assert json.loads(attrs["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}
    assert sqs.list_queue_tags(QueueUrl=work)["Tags"] == {"team": "data"}
    assert ordered.endswith(".fifo") and f"{stack}-Ordered-" in ordered
    assert sqs.get_queue_attributes(QueueUrl=ordered, AttributeNames=["ContentBasedDeduplication"])["Attributes"] == \
        {"ContentBasedDeduplication": "true"}
    dlq_url = sqs.get_queue_url(QueueName=dlq_arn.rsplit(":", 1)[1])["QueueUrl"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [work]
    sqs.send_message(QueueUrl=work, MessageBody="kept")  # an update in place keeps it

    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack,
                                "--parameter-overrides", "Visibility=90")
    assert code == 0, log
    assert actions["Work"] == "updated" and actions["DeadLetters"] == "unchanged"
    assert sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["VisibilityTimeout"])["Attributes"] == \
        {"VisibilityTimeout": "90"}
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=work)["Messages"]] == ["kept"]

    code, actions, log = deploy(capsys, server.url, str(template), "--stack-name", stack, "--delete")
    assert code == 0, log
    listed = sqs.list_queues(QueueNamePrefix=stack).get("QueueUrls", [])
    assert listed == []
