"""Validates each record's shape; an invalid one fails the whole batch (the mapping bisects it)."""
import base64
import json

REQUIRED = {"AtomicNumber": int, "Element": str, "Symbol": str}


def lambda_handler(event, context):
    for record in event["Records"]:
        payload = json.loads(base64.b64decode(record["kinesis"]["data"]))
        for key, kind in REQUIRED.items():
            if not isinstance(payload.get(key), kind):
                raise ValueError(f"record {record['kinesis']['sequenceNumber']}: '{key}' must be {kind.__name__}")
    for record in event["Records"]:
        payload = json.loads(base64.b64decode(record["kinesis"]["data"]))
        print(f"valid element {payload['Symbol']}")
    return {"processed": len(event["Records"])}
