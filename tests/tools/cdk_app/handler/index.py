"""Forwards each Kinesis record's text to the queue in QUEUE_URL."""
import base64
import json
import os

import boto3

sqs = boto3.client("sqs")


def handler(event, context):
    for record in event["Records"]:
        sqs.send_message(QueueUrl=os.environ["QUEUE_URL"], MessageBody=json.dumps({
            "data": base64.b64decode(record["kinesis"]["data"]).decode(),
            "function": context.function_name,
        }))
    return {"forwarded": len(event["Records"])}
