"""Console producer and consumer for kinesim streams, the way Kafka's console tools work.

- `kinesim put STREAM` (put.py): lines from stdin, or generated events (generators.py), batched into
  PutRecords calls; throttled records are retried.
- `kinesim tail STREAM` (tail.py): prints records as they arrive on every shard, following resharding.

Both talk to the server through boto3, as any client does (connection.py).
"""
