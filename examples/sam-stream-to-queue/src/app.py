"""Forwards each Kinesis record to the queue in QUEUE_URL, with the GREETING of the deployment and
the record's text in snake_case (by `inflection`, installed into the package by `sam build`)."""
import base64
import json
import os

import boto3
import inflection

sqs = boto3.client("sqs")


def handler(event, context):
    for record in event["Records"]:
        text = base64.b64decode(record["kinesis"]["data"]).decode()
        sqs.send_message(QueueUrl=os.environ["QUEUE_URL"], MessageBody=json.dumps({
            "greeting": os.environ["GREETING"],
            "data": text,
            "snake": inflection.underscore(text),
            "sequence": record["kinesis"]["sequenceNumber"],
        }))
    return {"forwarded": len(event["Records"])}
