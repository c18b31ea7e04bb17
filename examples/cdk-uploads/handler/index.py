"""Each object created under in/ becomes a message on the queue: its key, size and the greeting."""
import json
import os

import boto3

sqs = boto3.client("sqs")


def handler(event, context):
    for record in event["Records"]:
        obj = record["s3"]["object"]
        sqs.send_message(QueueUrl=os.environ["QUEUE_URL"], MessageBody=json.dumps(
            {"key": obj["key"], "size": obj["size"], "greeting": os.environ["GREETING"]}))
