"""Server settings: one object, filled by the CLI (or a test), read by every service."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field


DEFAULT_KAFKA_PORT = 9092  # Kafka's own


class SettingsError(ValueError):
    """Settings that cannot work together, explained in the user's terms."""


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 4566
    data_dir: str = ".kinesim"
    in_memory: bool = False
    # How long streams stay CREATING / DELETING / UPDATING. AWS takes seconds; small by default
    # so local code that waits for ACTIVE still exercises the wait.
    create_stream_ms: int = 100
    delete_stream_ms: int = 100
    update_stream_ms: int = 100
    # AWS's default shard quota in us-east-1 (200 in most other regions).
    shard_limit: int = 500
    # CloudFormation stacks the account may hold: AWS's default quota ("Stacks", Understand
    # CloudFormation quotas), adjustable there as here. It also ends nested stacks that create
    # themselves: past it CreateStack is LimitExceededException.
    stack_limit: int = 2000
    region: str = "us-east-1"
    account_id: str = "000000000000"
    enforce_limits: bool = False
    log_level: str = "info"
    # AWS's fixed 5 minutes; settable so tests can see expiry without waiting.
    iterator_ttl_s: float = 300.0
    # How often expired records are deleted (reads hide them at once regardless).
    retention_sweep_s: float = 60.0
    # Seconds in one hour of a stream's retention period (3600). Lower it to see records expire
    # without waiting a day: with 0.05, the 24-hour minimum lasts 1.2 seconds.
    retention_hour_s: float = 3600.0
    # SubscribeToShard: how long a subscription lasts (AWS: 5 minutes) and the longest gap between
    # its events (records or empty ones); settable so tests can see both end.
    subscription_s: float = 300.0
    subscription_heartbeat_s: float = 5.0
    # Threads that serve requests (made as needed, up to this many). A request holds one while it
    # runs: an open SubscribeToShard for up to five minutes, a slow upload while it trickles in.
    # Connections hold none while they wait for their next request (nor count against anything
    # but the open-files limit); they are closed after 30 s of silence (idle_connections.py).
    request_threads: int = 2048
    # Seconds a connection may stay silent (before its first request, between requests, halfway
    # through a request's head) before the server closes it, as AWS's endpoints do; 1 ms - 60 s.
    idle_connection_s: float = 30.0
    # Requests that wait by design hold a thread each; they are capped so that at least
    # `request_threads - max_subscriptions - max_long_polls` threads (256) stay for short calls.
    # SubscribeToShard calls open at once; past it LimitExceededException.
    max_subscriptions: int = 768
    # Long polls waiting at once, SQS ReceiveMessage and Kinesis ReceiveQueueRecords together;
    # past it a receive answers at once with what the queue has (an empty answer is one a long
    # poll may give: clients poll again).
    max_long_polls: int = 1024
    # Firehose: multiplies BufferingHints.IntervalInSeconds (and retry durations) so tests can see
    # a 60 s buffer flush in 0.6 s (0.01). 1.0 is AWS's timing.
    firehose_interval_scale: float = 1.0
    # Firehose: an S3 endpoint (e.g. http://localhost:9000) that receives deliveries to buckets
    # that do not exist in kinesim's own object store. AWS has no such field; None: local only.
    firehose_s3_endpoint: str | None = None

    # Web pages allowed to call the server besides this machine's own (`http://localhost:*` and
    # the like); "*" allows every origin. See kinesim/guard.py.
    cors_origins: list[str] = field(default_factory=list)
    # Host names the server may be reached by besides localhost and IP addresses (DNS rebinding
    # defence); a name starting with "." allows its subdomains, "*" allows any.
    allowed_hosts: list[str] = field(default_factory=list)
    # Check SigV4 signatures against `credentials` ("ACCESS_KEY_ID:SECRET" strings) instead of
    # taking any well-formed credentials, as AWS does: for servers other machines can reach.
    verify_signatures: bool = False
    credentials: list[str] = field(default_factory=list)
    # The Kafka protocol's port (kinesim/kafka), on `host` like the HTTP port; 0: no Kafka.
    kafka_port: int = DEFAULT_KAFKA_PORT
    # Kafka's group.initial.rebalance.delay.ms: a new consumer group waits this long for more
    # members before its first generation (ServerProcess, for tests, passes 0).
    kafka_initial_rebalance_ms: int = 3000

    @property
    def local_host(self) -> str:
        """The address this machine reaches the server at (a wildcard bind is reached on loopback)."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def local_authority(self) -> str:
        """`host:port` as a URL or a Host header names it (an IPv6 address in brackets)."""
        host = self.local_host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def local_url(self) -> str:
        return f"http://{self.local_authority}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Settings":
        return cls(**json.loads(text))


def partition_of(region: str) -> str:
    """The AWS partition a region belongs to, as ARNs name it."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"
