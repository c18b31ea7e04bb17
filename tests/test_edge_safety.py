"""The edge under hostile or careless clients: foreign web pages, DNS rebinding, held requests,
oversized requests, exposure to the network, and signature checks for shared hosts."""
from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
import urllib.parse
import zipfile

import boto3
import pytest
import requests
from botocore.config import Config

from kinesim.server import free_port
from tests.conftest import client_for, start_server

AUTH = ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/{service}/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=abcd")
JSON = "application/x-amz-json-1.1"


def kinesis_headers(op: str, **extra) -> dict[str, str]:
    return {"X-Amz-Target": f"Kinesis_20131202.{op}", "Content-Type": JSON, "X-Amz-Date": "20260101T000000Z",
            "Authorization": AUTH.format(service="kinesis"), **extra}


def handler_zip(code: str = "def handler(event, context):\n    return 'ran'\n") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", code)
    return buf.getvalue()


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    proc = start_server(tmp_path_factory, cors_origins=["https://allowed.example"])
    yield proc
    proc.stop()


# Foreign web pages (drive-by code execution)

def test_page_of_another_site_cannot_create_or_run_a_function(srv):
    # What a page can send without a preflight: text/plain, credentials in the query string.
    query = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20260101%2Fus-east-1%2Flambda%2Faws4_request"
             "&X-Amz-Date=20260101T000000Z&X-Amz-SignedHeaders=host&X-Amz-Signature=abcd")
    body = json.dumps({"FunctionName": "driveby", "Runtime": "python3.12", "Handler": "app.handler",
                       "Role": "arn:aws:iam::000000000000:role/r",
                       "Code": {"ZipFile": __import__("base64").b64encode(handler_zip()).decode()}})
    r = requests.post(f"{srv.url}/2015-03-31/functions?{query}", data=body,
                      headers={"Content-Type": "text/plain", "Origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["Type"] == "User"
    assert r.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert "Access-Control-Allow-Origin" not in r.headers
    # The same request without Origin (not from a browser) is still refused for its content type.
    r = requests.post(f"{srv.url}/2015-03-31/functions?{query}", data=body, headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.headers["x-amzn-ErrorType"] == "UnsupportedMediaTypeException"
    lam = client_for(srv.url, "lambda")
    assert [f["FunctionName"] for f in lam.list_functions()["Functions"]] == []


def test_page_of_another_site_cannot_delete_objects(srv):
    s3 = client_for(srv.url, "s3")
    s3.create_bucket(Bucket="keep-me")
    s3.put_object(Bucket="keep-me", Key="a.txt", Body=b"data")
    body = "<Delete><Object><Key>a.txt</Key></Object></Delete>"
    r = requests.post(f"{srv.url}/keep-me?delete", data=body,
                      headers={"Content-Type": "text/plain", "Origin": "http://evil.example"})
    assert r.status_code == 403 and b"<Code>AccessDenied</Code>" in r.content
    r = requests.post(f"{srv.url}/keep-me?delete", data=body, headers={"Content-Type": "text/plain"})
    assert r.status_code == 403 and b"Content-Type" in r.content
    assert s3.get_object(Bucket="keep-me", Key="a.txt")["Body"].read() == b"data"


def test_kinesis_calls_from_foreign_pages_are_refused(srv):
    for origin in ("https://evil.example", "null", "http://localhost.evil.example", "file://"):
        r = requests.post(srv.url, data=b"{}", headers=kinesis_headers("ListStreams", Origin=origin))
        assert r.status_code == 403, origin
        assert r.json()["__type"] == "AccessDeniedException"
    # No Origin, but the browser says a foreign site caused the request.
    r = requests.get(f"{srv.url}/_kinesim/health", headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:8080", "https://app.localhost",
                                    "http://[::1]:5173", "https://allowed.example"])
def test_allowed_origins_get_cors_answers(srv, origin):
    r = requests.options(srv.url, headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                           "Access-Control-Request-Headers": "content-type,x-amz-target,authorization"})
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == origin
    assert r.headers["Access-Control-Allow-Methods"] == "POST"
    assert r.headers["Access-Control-Allow-Headers"] == "content-type,x-amz-target,authorization"
    assert r.headers["Access-Control-Max-Age"] == "172800"
    r = requests.post(srv.url, data=b"{}", headers=kinesis_headers("ListStreams", Origin=origin))
    assert r.status_code == 200 and "StreamNames" in r.json()
    assert r.headers["Access-Control-Allow-Origin"] == origin
    assert "x-amzn-RequestId" in r.headers["Access-Control-Expose-Headers"]


def test_preflight_from_a_foreign_origin_is_refused(srv):
    r = requests.options(srv.url, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert r.status_code == 403 and "Access-Control-Allow-Origin" not in r.headers


def test_any_origin_only_when_asked(tmp_path_factory):
    proc = start_server(tmp_path_factory, cors_origins=["*"])
    try:
        r = requests.post(proc.url, data=b"{}", headers=kinesis_headers("ListStreams", Origin="https://any.example"))
        assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "https://any.example"
    finally:
        proc.stop()


# DNS rebinding: the Host header must name this server

@pytest.mark.parametrize("host,allowed", [
    ("localhost", True), ("127.0.0.1:4566", True), ("[::1]:4566", True), ("my-bucket.localhost:4566", True),
    ("10.1.2.3", True),  # an IP literal cannot be rebound
    ("evil.example", False), ("evil.example:4566", False), ("localhost.evil.example", False),
])
def test_host_header_must_name_the_server(srv, host, allowed):
    r = requests.get(f"{srv.url}/_kinesim/health", headers={"Host": host})
    assert (r.status_code != 403) == allowed, r.text
    if not allowed:
        assert "--allowed-hosts" in r.text


def test_allowed_hosts_flag(tmp_path_factory):
    proc = start_server(tmp_path_factory, allowed_hosts=["kinesim.internal", ".corp.example"])
    try:
        for host, status in (("kinesim.internal:4566", 200), ("a.corp.example", 200), ("evil.example", 403)):
            assert requests.get(f"{proc.url}/_kinesim/health", headers={"Host": host}).status_code == status
    finally:
        proc.stop()


# kinesim's own routes

def test_health_paths_only_for_this_machine(srv):
    from kinesim.admin import is_loopback as _is_loopback
    assert requests.get(f"{srv.url}/_kinesim/health").json()["s3_root"].endswith("s3")
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and not _is_loopback("192.168.1.5")
    assert not _is_loopback(None) and not _is_loopback("garbage")


def test_health_tells_other_machines_no_paths(tmp_path):
    from kinesim.config import Settings
    from kinesim.edge import Edge
    edge = Edge(Settings(data_dir=str(tmp_path)))
    try:
        doc = edge.flask.test_client().get("/_kinesim/health", environ_base={"REMOTE_ADDR": "192.0.2.7"}).get_json()
        assert doc["status"] == "running" and "s3_root" not in doc and "data_dir" not in doc
    finally:
        edge.close()


def test_deeply_nested_stack_document(srv):
    for depth in (5000, 1000):
        r = requests.put(f"{srv.url}/_kinesim/stacks/deep", data=b'{"a":' + b"[" * depth + b"]" * depth + b"}")
        assert r.status_code == 400 and "JSON object" in r.json()["message"]
    r = requests.put(f"{srv.url}/_kinesim/stacks/deep", json={"a": [[[1]]]})
    assert r.status_code == 200 and requests.get(f"{srv.url}/_kinesim/stacks/deep").json() == {"a": [[[1]]]}


# Oversized requests: answered after being read, so clients that write first see the answer

def _send_then_read(url: str, head: bytes, body_size: int) -> bytes:
    u = urllib.parse.urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=60) as sock:
        sock.sendall(head)
        chunk = b"x" * (1 << 20)
        left = body_size
        while left:
            n = min(left, len(chunk))
            sock.sendall(chunk[:n])
            left -= n
        return sock.recv(4096)


def test_oversized_body_written_whole_gets_413(srv):
    size = 15 * 1024 * 1024
    head = (b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: Kinesis_20131202.PutRecord\r\n"
            b"Content-Type: application/x-amz-json-1.1\r\nContent-Length: %d\r\n\r\n" % size)
    answer = _send_then_read(srv.url, head, size)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
    r = requests.post(srv.url, data=b"x" * size, headers=kinesis_headers("PutRecord"))
    assert r.status_code == 413 and r.json()["__type"] == "SerializationException"


@pytest.mark.parametrize("length", [70_000, 200_000, 1_000_000])
def test_long_uri_gets_414(srv, length):
    r = requests.get(f"{srv.url}/" + "a" * length)
    assert r.status_code == 414
    assert requests.get(f"{srv.url}/_kinesim/health").status_code == 200


# Held requests must not starve short calls

def _list_streams_latencies(url: str, count: int = 20) -> list[float]:
    times = []
    for _ in range(count):
        start = time.monotonic()
        r = requests.post(url, data=b"{}", headers=kinesis_headers("ListStreams"), timeout=60)
        assert r.status_code == 200
        times.append(time.monotonic() - start)
    return times


def _open_subscription(url: str, consumer: str, shard: str) -> socket.socket:
    u = urllib.parse.urlparse(url)
    body = json.dumps({"ConsumerARN": consumer, "ShardId": shard, "StartingPosition": {"Type": "LATEST"}}).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in kinesis_headers("SubscribeToShard").items())
    sock = socket.create_connection((u.hostname, u.port), timeout=120)
    sock.sendall(f"POST / HTTP/1.1\r\nHost: localhost\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def _await_status(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_subscriptions_past_the_limit_get_limit_exceeded(tmp_path_factory):
    proc = start_server(tmp_path_factory, max_subscriptions=2, subscription_heartbeat_s=30.0)
    socks = []
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="s", ShardCount=3)
        arn = k.describe_stream_summary(StreamName="s")["StreamDescriptionSummary"]["StreamARN"]
        consumer = k.register_stream_consumer(StreamARN=arn, ConsumerName="c")["Consumer"]["ConsumerARN"]
        deadline = time.monotonic() + 60
        while k.describe_stream_consumer(ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"] != "ACTIVE":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for shard in range(2):
            socks.append(_open_subscription(proc.url, consumer, f"shardId-{shard:012d}"))
            assert _await_status(socks[-1]).startswith(b"HTTP/1.1 200")
        with pytest.raises(k.exceptions.LimitExceededException, match="--max-subscriptions"):
            k.subscribe_to_shard(ConsumerARN=consumer, ShardId="shardId-000000000002",
                                 StartingPosition={"Type": "LATEST"})
    finally:
        for sock in socks:
            sock.close()
        proc.stop()


def test_slow_uploads_do_not_starve_short_calls(srv):
    u = urllib.parse.urlparse(srv.url)
    socks = []
    try:
        for i in range(100):
            sock = socket.create_connection((u.hostname, u.port), timeout=60)
            if i % 2:  # a Kinesis call whose body trickles in
                head = "".join(f"{k}: {v}\r\n" for k, v in kinesis_headers("PutRecord").items())
                sock.sendall(f"POST / HTTP/1.1\r\nHost: localhost\r\n{head}Content-Length: 1000\r\n\r\n{{".encode())
            else:  # an S3 upload whose body trickles in
                sock.sendall(b"PUT /slow/key HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\nabc")
            socks.append(sock)
        assert max(_list_streams_latencies(srv.url)) < 10
    finally:
        for sock in socks:
            sock.close()


# Exposed to the network

def test_listening_on_every_interface_warns(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kinesim", "serve", "--host", "0.0.0.0", "--port", str(port),
                             "--data-dir", str(tmp_path)], stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line and "0.0.0.0" in line:
                break
        text = "".join(lines)
        assert "ANY machine" in text and "--verify-signatures" in text
    finally:
        proc.terminate()
        proc.wait(30)


def test_verify_signatures_needs_credentials(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("AWS_")}
    out = subprocess.run([sys.executable, "-m", "kinesim", "serve", "--port", str(free_port()), "--data-dir",
                          str(tmp_path), "--verify-signatures"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0 and "--credential KEY_ID:SECRET" in out.stderr


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    proc = start_server(tmp_path_factory, verify_signatures=True, credentials=["AKIDGOOD:good-secret"])
    yield proc
    proc.stop()


def _client(url: str, service: str, key: str = "AKIDGOOD", secret: str = "good-secret", **config):
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}, **config))


def test_signed_requests_are_served(signed):
    k = _client(signed.url, "kinesis")
    k.create_stream(StreamName="signed", ShardCount=1)
    k.put_record(StreamName="signed", Data=b"x", PartitionKey="p")
    assert "signed" in k.list_streams()["StreamNames"]
    lam = _client(signed.url, "lambda")
    lam.create_function(FunctionName="fn", Runtime="python3.12", Handler="app.handler",
                        Role="arn:aws:iam::000000000000:role/r", Code={"ZipFile": handler_zip()})
    assert lam.invoke(FunctionName="fn")["Payload"].read() == b'"ran"'
    s3 = _client(signed.url, "s3")
    s3.create_bucket(Bucket="signed-bucket")
    s3.put_object(Bucket="signed-bucket", Key="dir/a b+c~d.txt", Body=b"hello")
    assert s3.get_object(Bucket="signed-bucket", Key="dir/a b+c~d.txt")["Body"].read() == b"hello"
    assert _client(signed.url, "firehose").list_delivery_streams()["DeliveryStreamNames"] == []
    for s3c in (s3, _client(signed.url, "s3", signature_version="s3v4")):  # boto3's default presigns with v2
        url = s3c.generate_presigned_url("get_object", Params={"Bucket": "signed-bucket", "Key": "dir/a b+c~d.txt"})
        assert requests.get(url).content == b"hello"
        assert requests.get(url.replace("Signature=", "Signature=0")).status_code == 403


# (service, credentials, the call, expected error code or None, expected status or None)
REFUSED = [
    ("kinesis", {"secret": "wrong"}, "list_streams", "InvalidSignatureException", 400),
    ("kinesis", {"key": "AKIDNOPE"}, "list_streams", "UnrecognizedClientException", None),
    ("lambda", {"secret": "wrong"}, "list_functions", None, 403),
    ("s3", {"secret": "wrong"}, "list_buckets", "SignatureDoesNotMatch", None),
    ("s3", {"key": "AKIDNOPE"}, "list_buckets", "InvalidAccessKeyId", None),
]


def test_wrong_or_unknown_credentials_are_refused(signed):
    for service, credentials, call, code, status in REFUSED:
        with pytest.raises(Exception) as err:
            getattr(_client(signed.url, service, **credentials), call)()
        if code is not None:
            assert err.value.response["Error"]["Code"] == code
        if status is not None:
            assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert requests.get(f"{signed.url}/signed-bucket").status_code == 403  # anonymous


def test_signatures_from_another_time_are_refused():
    from kinesim.protocol import sigv4
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    req = AWSRequest(method="POST", url="http://127.0.0.1:4566/", data=b"{}",
                     headers={"X-Amz-Target": "Kinesis_20131202.ListStreams", "Content-Type": JSON})
    SigV4Auth(Credentials("AKIDGOOD", "s"), "kinesis", "us-east-1").add_auth(req)
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "QUERY_STRING": "", "HTTP_HOST": "127.0.0.1:4566",
               "CONTENT_LENGTH": "2", "wsgi.input": io.BytesIO(b"{}")}
    for name, value in req.headers.items():
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else "HTTP_" + key] = value
    now = time.time()
    assert sigv4.Verifier({"AKIDGOOD": "s"}, clock=lambda: now).check(environ, b"{}") is None
    late = sigv4.Verifier({"AKIDGOOD": "s"}, clock=lambda: now + 16 * 60).check(environ, b"{}")
    assert late.kind == "expired" and "Signature expired" in late.message
    assert sigv4.Verifier({"AKIDGOOD": "s"}, clock=lambda: now).check(environ, b"{ }").kind == "mismatch"


def test_own_routes_answer_this_machine_only_when_verifying(signed):
    assert requests.get(f"{signed.url}/_kinesim/health").status_code == 200
    assert requests.get(f"{signed.url}/_kinesim/stacks/none").status_code == 404  # from loopback: served
