"""Content users stored is never served as the console's own origin (DESIGN.md; issue 30, defect 8).

kinesim serves the console, every AWS API and every bucket's objects from one origin. An HTML object
opened in a browser ran its scripts as a page of that origin: it could call the console's API and
every AWS API as the user. Objects a pipeline writes from untrusted data (Firehose deliveries,
channels) made that reachable without the user uploading anything. Now every S3 answer is sandboxed
(`Content-Security-Policy: sandbox`, `X-Content-Type-Options: nosniff`; AWS sends neither, see
kinesim/s3/api.py): a stored page renders and runs nothing. And a sandboxed document that may run
scripts (a frame with `sandbox="allow-scripts"`) has an opaque origin, `Origin: null`, which the
edge's guard refuses for the console and for every AWS API, simple no-CORS form posts included.

The browser is Debian's Chromium under Playwright (tests/console_browser.py).
"""
from __future__ import annotations

import html
import json
import re
import struct
import urllib.parse
import uuid
import zlib

import pytest
import requests
from requests.structures import CaseInsensitiveDict

from conftest import client_for, start_server
from console_browser import console_browser_fixture, serving  # noqa: F401 (the console_browser fixture)

CSP = "sandbox"
# A query signed for SNS (what a web page may put in a URL): the edge routes the form post to SNS.
SNS_QUERY = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20260101%2Fus-east-1%2Fsns%2Faws4_request"
             "&X-Amz-Date=20260101T000000Z&X-Amz-SignedHeaders=host&X-Amz-Signature=abcd")

# What a hostile stored page tries, in the name `NAME`: read the console, create a stream, write into
# the bucket, create a topic by a form post a page may send anywhere (no preflight). Its title says at
# once that it ran, then what happened; it tells its parent frame, if any.
SCRIPT = """
document.title = "script ran";
const BASE = %(base)s, NAME = %(name)s, BUCKET = %(bucket)s, SNS_QUERY = %(sns)s;
async function attempt(url, init) {
  try {
    const answer = await fetch(url, init);
    return answer.type + " " + answer.status;
  } catch (err) {
    return "error " + err.name;
  }
}
(async () => {
  const seen = {};
  seen.console = await attempt(BASE + "/_kinesim/console/api/overview");
  seen.createStream = await attempt(BASE + "/", {method: "POST",
    headers: {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Kinesis_20131202.CreateStream"},
    body: JSON.stringify({StreamName: NAME, ShardCount: 1})});
  seen.putObject = await attempt(BASE + "/" + BUCKET + "/" + NAME, {method: "PUT", body: "written by a stored page"});
  seen.formPost = await attempt(BASE + "/?" + SNS_QUERY, {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "Action=CreateTopic&Name=" + NAME});
  document.title = "ran: " + JSON.stringify(seen);
  if (window.parent !== window) window.parent.postMessage(seen, "*");
})();
"""


def hostile_page(base: str, name: str, bucket: str) -> str:
    script = SCRIPT % {k: json.dumps(v) for k, v in dict(base=base, name=name, bucket=bucket, sns=SNS_QUERY).items()}
    return (f"<!doctype html><html><head><title>stored page</title></head><body>"
            f"<p id='visible'>a page stored in a bucket</p><script>{script}</script></body></html>")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3", s3={"addressing_style": "path"})


@pytest.fixture
def bucket(s3):
    name = "stored-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name)
    return name


def nothing_done(server, s3, bucket: str, name: str) -> None:
    """Nothing the hostile page tried in the name `name` happened."""
    assert name not in client_for(server.url).list_streams(Limit=10000)["StreamNames"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix=name)["KeyCount"] == 0
    topics = client_for(server.url, "sns").list_topics()["Topics"]
    assert not [t for t in topics if t["TopicArn"].endswith(":" + name)]


def png(width: int, height: int) -> bytes:
    """A red PNG image."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def sandboxed(headers) -> bool:
    return headers.get("Content-Security-Policy") == CSP and headers.get("X-Content-Type-Options") == "nosniff"


# ------------------------------------------------------------------ the headers, over plain HTTP

def test_every_way_to_an_object_is_sandboxed_and_sdks_read_it_as_before(server, s3, bucket):
    page = hostile_page("", "x", bucket).encode()
    s3.put_object(Bucket=bucket, Key="page.html", Body=page, ContentType="text/html")
    got = s3.get_object(Bucket=bucket, Key="page.html")
    assert got["Body"].read() == page and got["ContentType"] == "text/html"
    assert sandboxed(CaseInsensitiveDict(got["ResponseMetadata"]["HTTPHeaders"]))
    head = s3.head_object(Bucket=bucket, Key="page.html")
    assert head["ContentLength"] == len(page)
    assert sandboxed(CaseInsensitiveDict(head["ResponseMetadata"]["HTTPHeaders"]))

    for params in ({}, {"ResponseContentType": "text/html", "ResponseContentDisposition": "inline"}):
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "page.html", **params})
        answer = requests.get(url)
        assert answer.status_code == 200 and answer.content == page and answer.headers["Content-Type"] == "text/html"
        assert sandboxed(answer.headers), answer.headers
    port = urllib.parse.urlsplit(server.url).port
    virtual = requests.get(f"{server.url}/page.html", headers={"Host": f"{bucket}.localhost:{port}"})
    assert virtual.status_code == 200 and virtual.content == page and sandboxed(virtual.headers)
    # Listings and errors name stored keys: sandboxed too.
    for answer in (requests.get(f"{server.url}/{bucket}?list-type=2"), requests.get(f"{server.url}/{bucket}/none.html"),
                   requests.head(f"{server.url}/{bucket}/page.html")):
        assert answer.status_code in (200, 404) and sandboxed(answer.headers), answer.headers


JSON_11, JSON_10, FORM = "application/x-amz-json-1.1", "application/x-amz-json-1.0", "application/x-www-form-urlencoded"


@pytest.mark.parametrize("method,path,headers,body", [
    ("GET", "/_kinesim/console/api/overview", {}, None),
    ("POST", "/_kinesim/console/api/streams/{name}/put", {"Content-Type": "application/json"}, b"{}"),
    ("POST", "/", {"Content-Type": JSON_11, "X-Amz-Target": "Kinesis_20131202.ListStreams"}, b"{}"),
    ("POST", "/", {"Content-Type": JSON_10, "X-Amz-Target": "AmazonSQS.ListQueues"}, b"{}"),
    ("GET", "/{bucket}/page.html", {}, None),
    ("PUT", "/{bucket}/{name}", {}, b"x"),
    ("GET", "/2015-03-31/functions", {}, None),
    ("POST", "/?" + SNS_QUERY, {"Content-Type": FORM}, b"Action=CreateTopic&Name={name}"),
    ("OPTIONS", "/", {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-amz-target"}, None),
], ids=["console", "console-action", "kinesis", "sqs", "s3-get", "s3-put", "lambda", "sns-form-post", "preflight"])
def test_a_sandboxed_documents_requests_are_refused(server, s3, bucket, method, path, headers, body):
    name = "null-" + uuid.uuid4().hex[:8]
    s3.put_object(Bucket=bucket, Key="page.html", Body=b"<p>stored</p>", ContentType="text/html")
    url = server.url + path.format(bucket=bucket, name=name)
    data = body.replace(b"{name}", name.encode()) if body else None
    refused = requests.request(method, url, headers={"Origin": "null", **headers}, data=data)
    assert refused.status_code == 403 and "Origin 'null' is not allowed to call kinesim" in refused.text, refused.text
    assert "Access-Control-Allow-Origin" not in refused.headers
    nothing_done(server, s3, bucket, name)


# ------------------------------------------------------------------ in a browser

def test_a_stored_page_renders_but_cannot_act_as_the_console(console_browser, server, s3, bucket):
    from playwright.sync_api import expect
    name = "page-" + uuid.uuid4().hex[:8]
    s3.put_object(Bucket=bucket, Key="page.html", Body=hostile_page("", name, bucket).encode(), ContentType="text/html")
    presigned = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "page.html"})
    context = console_browser.new_context()
    try:
        page = context.new_page()
        for url in (f"{server.url}/{bucket}/page.html", presigned):
            page.goto(url)  # returns once the page has loaded: an inline script would have run by then
            expect(page.locator("#visible")).to_have_text("a page stored in a bucket")
            assert page.title() == "stored page"  # its script did not run
            assert page.evaluate("self.origin") == "null"  # and its origin is not the console's
        nothing_done(server, s3, bucket, name)
        # An image still displays from its presigned URL.
        s3.put_object(Bucket=bucket, Key="red", Body=png(7, 5), ContentType="image/png")
        page.goto(s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "red"}))
        assert page.evaluate("[document.images[0].naturalWidth, document.images[0].naturalHeight]") == [7, 5]
    finally:
        context.close()


def test_a_sandboxed_frame_that_runs_scripts_is_refused_everywhere(console_browser, server, s3, bucket):
    """What a stored page's script would meet if it ran (a frame sandboxed with `allow-scripts`, in a
    page of an origin kinesim allows): every request carries `Origin: null`, and none gets through."""
    from playwright.sync_api import expect
    name = "frame-" + uuid.uuid4().hex[:8]
    frame = html.escape(hostile_page(server.url, name, bucket), quote=True)
    host = (f"<!doctype html><title>host</title><iframe sandbox='allow-scripts' srcdoc=\"{frame}\"></iframe>"
            "<script>addEventListener('message', (e) => { document.title = 'frame: ' + JSON.stringify(e.data); });"
            "</script>").encode()
    with serving(host, "127.0.0.1") as origin:
        context = console_browser.new_context()
        try:
            page = context.new_page()
            page.goto(origin + "/")
            expect(page).to_have_title(re.compile("^frame: "))
            seen = json.loads(page.title()[len("frame: "):])
        finally:
            context.close()
    # CORS requests fail in the browser (the guard answers no CORS to `null`); the no-CORS form post's
    # answer is opaque to the page: whether it got through, the server's state says.
    assert {k: v for k, v in seen.items() if k != "formPost"} == {
        "console": "error TypeError", "createStream": "error TypeError", "putObject": "error TypeError"}, seen
    assert seen["formPost"] == "opaque 0", seen
    nothing_done(server, s3, bucket, name)
