"""The fuzz sweep of tests/test_fuzz.py and tests/test_fuzz_control.py, one per group of services
(two files, so that the test processes run the two halves side by side): a server of its own, every
operation of the group's models swept (tests/fuzzing.py), and the checks that the server stayed up
with what it acknowledged intact. See tests/test_fuzz.py for what is sent."""
from __future__ import annotations

import collections
import json
import os
import random
import urllib.request
import uuid

import pytest

from conftest import client_for
from fuzz_wire import Connection, Outcome, Request, is_failure
from fuzzing import (MEMORY_LIMIT, STACK_LIMIT, TRACEBACK, Fuzzer, LoggedServer, QueryOperation, create_resources,
                     stack_template)
from kinesim.config import Settings
from kinesim.server import free_port

SEED = int(os.environ.get("KINESIM_FUZZ_SEED", "9"))
DATA_SERVICES = ("kinesis", "firehose", "lambda", "s3", "sns", "sqs", "logs")
CONTROL_SERVICES = ("cloudformation", "sts", "ssm", "ecr", "iam")


def start_fuzz_server(tmp_path_factory) -> LoggedServer:
    # A SubscribeToShard that the fuzzer gets right streams for a second, not AWS's 5 minutes.
    # Its log in a file: what failed in the background (a poller, a delivery) shows only there.
    # Stacks and memory limited (fuzzing.STACK_LIMIT, MEMORY_LIMIT): self-nesting stacks and bombs.
    work = tmp_path_factory.mktemp("fuzz")
    settings = Settings(port=free_port(), data_dir=str(work / "data"), create_stream_ms=0, delete_stream_ms=0,
                        update_stream_ms=0, log_level="warning", subscription_s=1.0, stack_limit=STACK_LIMIT)
    return LoggedServer(settings, work / "server.log", memory_limit=MEMORY_LIMIT).start()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/_kinesim/health", timeout=30) as r:
            return r.status == 200
    except OSError:
        return False


def _report(failures: list[tuple[Request, Outcome]], limit: int = 60) -> str:
    by_op = collections.Counter(f"{req.service}.{req.operation}" for req, _ in failures)
    lines = [f"{len(failures)} requests got a 5xx, no answer, a 2xx where AWS refuses or an answer that is no XML "
             f"document; by operation: {dict(by_op)}"]
    for req, out in failures[:limit]:
        lines.append(f"  {out.status} <- {req.describe(200)}\n      answer: {out.excerpt(300)}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    """A server of the module's own (start_fuzz_server), stopped after its sweep."""
    proc = start_fuzz_server(tmp_path_factory)
    yield proc
    proc.stop()


def sweep(fuzz_server: LoggedServer, services: tuple[str, ...]) -> None:
    """Sweep `services`' operations; fail with every request that failed and what the server logged."""
    url = fuzz_server.url
    kinesis = client_for(url)
    # Acknowledged before the fuzzing, in a stream the fuzzer never names: it must stay readable.
    witness = "witness-" + uuid.uuid4().hex[:12]
    kinesis.create_stream(StreamName=witness, ShardCount=1)
    acked = kinesis.put_record(StreamName=witness, Data=b"acknowledged", PartitionKey="pk")
    ssm, ecr, cfn = client_for(url, "ssm"), client_for(url, "ecr"), client_for(url, "cloudformation")
    ssm.put_parameter(Name=f"/{witness}/kept", Value="acknowledged", Type="String")
    ecr.create_repository(repositoryName=witness)
    cfn.create_stack(StackName=witness, TemplateBody=stack_template(f"{witness}-export"))
    cfn.get_waiter("stack_create_complete").wait(StackName=witness, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300})

    fuzzer = Fuzzer(create_resources(url), services)
    conn = Connection(url, timeout=30)
    rng = random.Random(SEED)
    sent: collections.Counter[tuple[str, str]] = collections.Counter()
    documents: set[tuple[str, str]] = set()  # operations sent hostile documents or form keys
    failures: list[tuple[Request, Outcome]] = []

    def send(req: Request) -> Outcome:
        outcome = conn.send(req)
        sent[req.service, req.operation] += 1
        if req.case.startswith(("document ", "form keys ")):
            documents.add((req.service, req.operation))
        if is_failure(req, outcome):
            failures.append((req, outcome))
            if outcome.status is None and not _answers(url):
                # A server stuck for good (a request that never ends holding it): the rest of
                # the sweep would only wait out its timeouts.
                pytest.fail(_report(failures) + "\nthe server stopped answering after the last one", pytrace=False)
        return outcome

    fuzzer.sweep_all(rng, send)
    conn.close()
    per_service = collections.Counter()
    for (service, _), count in sent.items():
        per_service[service] += count
    print(f"fuzzed requests sent (seed {SEED}): {dict(per_service)}")

    # Every operation of the models, each with at least its valid, missing-member,
    # wrong-type, garbage-body, content-type and envelope cases.
    assert set(sent) == {(op.service, op.name) for ops in fuzzer.operations.values() for op in ops}
    assert set(per_service) == set(fuzzer.operations) and min(sent.values()) >= 6
    # ... and every operation that takes a document, a pattern or a form, its hostile ones; those
    # tables still find the documents in the models (a renamed member would drop them silently).
    assert documents == {op for op, slots in fuzzer.documents.items() if slots} | {
        (op.service, op.name) for ops in fuzzer.operations.values() for op in ops if isinstance(op, QueryOperation)}
    assert {op for op in (("sqs", "CreateQueue"), ("sqs", "SetQueueAttributes"), ("sns", "Subscribe"),
                          ("sns", "Publish"), ("sns", "SetSubscriptionAttributes"),
                          ("lambda", "UpdateEventSourceMapping"), ("firehose", "CreateDeliveryStream"),
                          ("kinesis", "PutResourcePolicy"), ("kinesis", "PutRecords"), ("logs", "FilterLogEvents"),
                          ("sts", "AssumeRole"), ("ssm", "PutParameter"), ("ecr", "PutLifecyclePolicy"),
                          ("ecr", "SetRepositoryPolicy")) if op[0] in services} <= documents
    templates = {op: {slot.path[-1] for slot in slots} for op, slots in fuzzer.documents.items()}
    if "cloudformation" in services:
        for name in ("CreateStack", "UpdateStack", "CreateChangeSet", "ValidateTemplate", "GetTemplateSummary"):
            assert {"TemplateBody", "TemplateURL"} <= templates["cloudformation", name]
    if "ssm" in services:
        assert "AllowedPattern" in templates["ssm", "PutParameter"]
    # The server is unharmed: it answers, and what it acknowledged is still there.
    with urllib.request.urlopen(url + "/_kinesim/health", timeout=30) as r:
        assert r.status == 200 and json.loads(r.read())["status"] == "running"
    assert witness in kinesis.list_streams(Limit=10000)["StreamNames"]
    it = kinesis.get_shard_iterator(StreamName=witness, ShardId=acked["ShardId"],
                                    ShardIteratorType="AT_SEQUENCE_NUMBER",
                                    StartingSequenceNumber=acked["SequenceNumber"])["ShardIterator"]
    records = kinesis.get_records(ShardIterator=it)["Records"]
    assert [(r["SequenceNumber"], r["Data"]) for r in records[:1]] == [(acked["SequenceNumber"], b"acknowledged")]
    assert ssm.get_parameter(Name=f"/{witness}/kept")["Parameter"]["Value"] == "acknowledged"
    assert ecr.describe_repositories(repositoryNames=[witness])["repositories"][0]["repositoryName"] == witness
    assert cfn.describe_stacks(StackName=witness)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    if failures:
        pytest.fail(_report(failures), pytrace=False)
    # Nor did anything fail where no request was answered: pollers, deliveries, readers.
    errors = collections.Counter(TRACEBACK.findall(fuzz_server.log_path.read_text(errors="replace")))
    assert not errors, f"the server logged tracebacks: {dict(errors)}; see {fuzz_server.log_path}"
