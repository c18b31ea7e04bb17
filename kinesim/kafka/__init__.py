"""Kafka clients on kinesim's streams: a second listener speaking the Kafka wire protocol, where a
topic is a stream, a partition a shard (partition N = shardId-N) and an offset a record's place in
its shard. Built on the kinesis package; nothing in it imports this one."""
