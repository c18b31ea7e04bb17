"""The only place that touches disk: streams, shards, records, consumers, tags in one SQLite database."""
from .sqlite import KafkaRecord, Store, StoredRecord

__all__ = ["KafkaRecord", "Store", "StoredRecord"]
