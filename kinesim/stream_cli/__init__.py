"""`kinesim put` and `kinesim tail`: a producer and a consumer of kinesim streams on the command
line, the way Kafka's console tools (kafka-console-producer, -consumer) work. (The web console is
kinesim/webconsole/.)

- `kinesim put STREAM` (put.py): lines from stdin, or generated events (generators.py), batched into
  PutRecords calls; throttled records are retried.
- `kinesim tail STREAM` (tail.py): prints records as they arrive on every shard, following resharding.

Both talk to the server through boto3, as any client does (connection.py).
"""


def reader_gone() -> int:
    """The reader of stdout went away (`| head`): point stdout at /dev/null so that the
    interpreter's last flush does not fail again, and leave quietly (exit 0)."""
    import os
    import sys
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
