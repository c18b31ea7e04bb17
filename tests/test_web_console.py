"""The web console in a real browser (Debian's headless Chromium under Playwright, tests/console_browser.py)
over a deployed pipeline (tests/templates/console-pipeline.yaml through the server's CloudFormation
API): every page shows what it must (found by the DOM ids the pages give their parts), a record put after
the stream page opened appears in its live tail, a split through the page shows two children, the
other actions (put, peek, invoke, flush, preview) do what they say, and a page of another web site
can neither read the console nor act through it. Each page is kept as a full-page screenshot (see
tests/console_browser.py for where). Continuous queries need Spark: here the queries page shows its
empty state; tests/test_web_console_queries.py covers a running query."""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from conftest import client_for, start_server, wait_for
from console_browser import PREFIX, Console, console_browser_fixture, foreign_origin, set_field  # noqa: F401
from test_deploy import object_keys, s3_client

TEMPLATE = Path(__file__).resolve().parent / "templates" / "console-pipeline.yaml"
STACK = "shop"
RECORDS = 40
LAG = re.compile(r"\d+(\.\d+)? (ms|s|min|h)\b")  # KS.fmt.ms

# a first run may install Chromium (apt-get, up to 2 × 900 s); then each test takes seconds
pytestmark = pytest.mark.timeout(2 * 900 + 300)


@dataclass
class Pipeline:
    url: str
    stream: str
    function: str
    queue: str
    queue_url: str
    topic_arn: str
    bucket: str
    delivery: str
    log_group: str

    def client(self, service: str = "kinesis"):
        return client_for(self.url, service, **({"s3": {"addressing_style": "path"}} if service == "s3" else {}))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The stack deployed on a server of the module's own, with something for every page: records
    on both shards (one that fails its batch and ends in the queue), a message published to the
    topic, log events in the app's log group."""
    server = start_server(tmp_path_factory)
    try:
        cfn = client_for(server.url, "cloudformation")
        cfn.create_stack(StackName=STACK, TemplateBody=TEMPLATE.read_text(),
                         Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"])
        cfn.get_waiter("stack_create_complete").wait(StackName=STACK, WaiterConfig={"Delay": 0.2, "MaxAttempts": 600})
        outputs = {o["OutputKey"]: o["OutputValue"] for o in cfn.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]}
        p = Pipeline(server.url, outputs["StreamName"], outputs["FunctionName"], outputs["QueueName"],
                     outputs["QueueUrl"], outputs["TopicArn"], outputs["BucketName"], outputs["DeliveryStreamName"],
                     outputs["LogGroupName"])
        kinesis = p.client()
        # One call, the poison record first: its shard's records arrive together, so the poison
        # record's batch holds others too, whatever the mapping's timing, and is bisected.
        records = [{"PartitionKey": "poison", "Data": json.dumps({"id": "poison", "fail": True}).encode()}] + [
            {"PartitionKey": f"user-{i}", "Data": json.dumps({"id": f"rec-{i:03}", "user": f"user-{i}", "amount": i}).encode()}
            for i in range(RECORDS)]
        put = kinesis.put_records(StreamName=p.stream, Records=records)
        assert put["FailedRecordCount"] == 0
        shards = [r["ShardId"] for r in put["Records"]]
        assert len(set(shards)) == 2 and shards.count(shards[0]) >= 2, shards
        p.client("sns").publish(TopicArn=p.topic_arn, Message=json.dumps({"alert": "disk almost full"}))
        logs = p.client("logs")
        logs.create_log_stream(logGroupName=p.log_group, logStreamName="web-1")
        logs.put_log_events(logGroupName=p.log_group, logStreamName="web-1", logEvents=[
            {"timestamp": int(1000 * time.time()), "message": f"GET /item/{i} 200"} for i in range(5)])
        # the poison record's batch was bisected down to it and sent to the queue, beside the topic's message
        sqs = p.client("sqs")
        wait_for(lambda: int(sqs.get_queue_attributes(QueueUrl=p.queue_url, AttributeNames=["ApproximateNumberOfMessages"])
                             ["Attributes"]["ApproximateNumberOfMessages"]) >= 2, timeout=120, interval=0.2)
        yield p
    finally:
        server.stop()


@pytest.fixture(scope="module")
def console(console_browser, pipeline):
    return Console(console_browser, pipeline.url)


def marker(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:10]}"


def shard_records(kinesis, stream: str, shard: str) -> list[dict]:
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = []
    while True:
        answer = kinesis.get_records(ShardIterator=iterator, Limit=10000)
        records += answer["Records"]
        if not answer["Records"] or "NextShardIterator" not in answer:
            return records
        iterator = answer["NextShardIterator"]


def all_records(kinesis, stream: str) -> list[dict]:
    return [r for s in kinesis.list_shards(StreamName=stream)["Shards"] for r in shard_records(kinesis, stream, s["ShardId"])]


def rows(page, table: str):
    """The rows of a KS.table (`table` is its id); an empty table is a p.empty and has none."""
    return page.locator(f"{table} tbody tr")


# the pages

def test_overview_lists_every_kind(console, pipeline):
    (mapping,) = pipeline.client("lambda").list_event_source_mappings(FunctionName=pipeline.function)["EventSourceMappings"]
    with console.open("/") as page:
        for table, name in (("#overview-streams", pipeline.stream), ("#overview-functions", pipeline.function),
                            ("#overview-mappings", mapping["UUID"]),
                            ("#overview-delivery-streams", pipeline.delivery), ("#overview-buckets", pipeline.bucket),
                            ("#overview-queues", pipeline.queue), ("#overview-topics", pipeline.topic_arn.split(":")[-1]),
                            ("#overview-log-groups", pipeline.log_group),
                            ("#overview-log-groups", f"/aws/lambda/{pipeline.function}")):
            expect(page.locator(f'{table} tr[data-id="{name}"]')).to_be_visible()
        # the stream row links to its page
        expect(page.locator(f'#overview-streams a[href="{PREFIX}/streams/{pipeline.stream}"]').first).to_be_visible()
        # kinds with nothing in them say so
        expect(page.locator("p.empty#overview-channels")).to_be_visible()
        expect(page.locator("p.empty#overview-queries")).to_be_visible()
        expect(page.locator("#data-dir-size")).to_have_text(re.compile(r"\d"))
        console.shot(page, "overview")


def test_stream_page_shows_shards_readers_and_lag(console, pipeline):
    kinesis = pipeline.client()
    shard_ids = [s["ShardId"] for s in kinesis.list_shards(StreamName=pipeline.stream)["Shards"]]
    with console.open(f"/streams/{pipeline.stream}") as page:
        expect(page.locator("h1")).to_contain_text("ACTIVE")
        expect(page.locator("#stream-figures")).to_contain_text(re.compile(r"open shards\s*2"))
        for shard in shard_ids:
            expect(page.locator(f'#shard-map [data-shard="{shard}"]')).to_be_visible()
            expect(page.locator(f'#shards tr[data-id="{shard}"]')).to_be_visible()
        # its two readers, each linked to its page, with their lag
        function_reader = rows(page, "#readers").filter(has_text=pipeline.function)
        delivery_reader = rows(page, "#readers").filter(has_text=pipeline.delivery)
        expect(function_reader.locator(f'a[href="{PREFIX}/functions/{pipeline.function}"]')).to_be_visible()
        expect(delivery_reader.locator(f'a[href="{PREFIX}/delivery-streams/{pipeline.delivery}"]')).to_be_visible()
        for reader in (function_reader, delivery_reader):
            expect(reader).to_contain_text(LAG)
        expect(page.locator("#chart-write-rate canvas").first).to_be_attached()
        expect(page.locator("#chart-lag canvas").first).to_be_attached()
        console.shot(page, "stream")


def test_record_put_after_the_page_opened_appears_in_the_live_tail(console, pipeline):
    kinesis = pipeline.client()
    with console.open(f"/streams/{pipeline.stream}") as page:
        tail = page.locator("#live-tail")
        expect(tail).to_be_attached()
        # a poll of the tail answered: from then on, what is put is new to it
        page.wait_for_event("requestfinished", lambda r: f"/streams/{pipeline.stream}/tail" in r.url)
        mark = marker("tail")
        seq = kinesis.put_record(StreamName=pipeline.stream, PartitionKey=mark,
                                 Data=json.dumps({"event": "checkout", "mark": mark}).encode())["SequenceNumber"]
        row = tail.locator(f'[data-id="{seq}"]')
        expect(row).to_contain_text(mark)
        expect(row).to_contain_text("checkout")  # the data decoded, not base64
        console.shot(page, "stream-live-tail")


def test_put_form_puts_a_record(console, pipeline):
    kinesis = pipeline.client()
    mark = marker("form")
    with console.open(f"/streams/{pipeline.stream}") as page:
        set_field(page, "#put-key", "from-the-console")
        set_field(page, "#put-data", json.dumps({"via": "put-form", "mark": mark}))
        page.locator("#put-submit").click()
        expect(page.locator("#live-tail")).to_contain_text(mark)
    (record,) = [r for r in all_records(kinesis, pipeline.stream) if mark.encode() in r["Data"]]
    assert record["PartitionKey"] == "from-the-console"
    assert json.loads(record["Data"]) == {"via": "put-form", "mark": mark}


def test_record_browser_peeks_from_trim_horizon(console, pipeline):
    kinesis = pipeline.client()
    shard = "shardId-000000000001"
    first = json.loads(shard_records(kinesis, pipeline.stream, shard)[0]["Data"])
    with console.open(f"/streams/{pipeline.stream}") as page:
        set_field(page, "#peek-shard", shard)
        set_field(page, "#peek-type", "TRIM_HORIZON")
        page.locator("#peek-submit").click()
        expect(page.locator("#peek-results")).to_contain_text(first["id"])
        console.shot(page, "stream-peek")


def test_split_through_the_console_shows_two_children(console, pipeline):
    kinesis = pipeline.client()
    parent = kinesis.list_shards(StreamName=pipeline.stream)["Shards"][0]
    low, high = (int(v) for v in parent["HashKeyRange"].values())
    with console.open(f"/streams/{pipeline.stream}") as page:
        set_field(page, "#split-shard", parent["ShardId"])
        # prefilled with the middle of the shard's hash key range
        expect(page.locator("#split-hash")).to_have_value(re.compile(r"^\d+$"))
        assert abs(int(page.locator("#split-hash").input_value()) - (low + high) / 2) <= 1
        page.locator("#split-submit").click()
        children = wait_for(lambda: [s["ShardId"] for s in kinesis.list_shards(StreamName=pipeline.stream)["Shards"]
                                     if s.get("ParentShardId") == parent["ShardId"]], timeout=60)
        assert len(children) == 2, children
        for child in children:
            expect(page.locator(f'#shard-map [data-shard="{child}"]')).to_be_visible()
            expect(page.locator(f'#shards tr[data-id="{child}"]')).to_be_visible()
        expect(page.locator(f'#shards tr[data-id="{parent["ShardId"]}"]')).to_contain_text(re.compile("closed", re.I))
        console.shot(page, "stream-after-split")


def test_function_page_shows_invocations_batches_logs_and_invokes(console, pipeline):
    lam = pipeline.client("lambda")
    (mapping,) = lam.list_event_source_mappings(FunctionName=pipeline.function)["EventSourceMappings"]
    with console.open(f"/functions/{pipeline.function}") as page:
        expect(page.locator("#function-figures")).to_contain_text(re.compile(r"\d"))
        expect(page.locator("#chart-invocations canvas").first).to_be_attached()
        expect(page.locator("#chart-duration canvas").first).to_be_attached()
        expect(page.locator(f'#function-mappings tr[data-id="{mapping["UUID"]}"]')).to_be_visible()
        # the poison record's batch was bisected, and given up on to the queue
        expect(page.locator("#mapping-timeline")).to_contain_text("bisected")
        expect(page.locator("#mapping-timeline")).to_contain_text("on-failure")
        expect(page.locator("#function-logs")).to_contain_text("handled")
        # a record put now is handled and its log line shows up, live
        mark = marker("logged")
        pipeline.client().put_record(StreamName=pipeline.stream, PartitionKey=mark, Data=json.dumps({"mark": mark}).encode())
        expect(page.locator("#function-logs")).to_contain_text(mark)
        echo = marker("echo")
        set_field(page, "#invoke-payload", json.dumps({"echo": echo}))
        page.locator("#invoke-submit").click()
        expect(page.locator("#invoke-result")).to_contain_text(echo)
        console.shot(page, "function")


def test_delivery_stream_page_shows_buffer_and_flushes(console, pipeline):
    s3 = pipeline.client("s3")
    mark = marker("delivered")
    with console.open(f"/delivery-streams/{pipeline.delivery}") as page:
        figures = page.locator("#delivery-figures")
        expect(figures).to_contain_text(pipeline.stream)
        expect(figures).to_contain_text(pipeline.bucket)
        pipeline.client().put_record(StreamName=pipeline.stream, PartitionKey=mark, Data=json.dumps({"mark": mark}).encode())
        # buffered (a 60 s interval), then delivered by the page's button
        expect(page.locator("#next-flush")).to_have_text(re.compile(r"^(in |now)"))
        expect(page.locator("#buffer")).to_contain_text(re.compile(r"[1-9]"))
        console.shot(page, "delivery-stream-buffered")

        def flushed_with_the_mark() -> list[str]:
            # The mark went to a child of the split shard, which Firehose reads only once the
            # parent's records are delivered: the first flush may write only the parent's, so the
            # user flushes again once the child's records are buffered.
            page.locator("#flush-submit").click()
            expect(page.locator("#flush-submit")).to_be_enabled()
            return [k for k in object_keys(s3, pipeline.bucket, "events/")
                    if mark.encode() in s3.get_object(Bucket=pipeline.bucket, Key=k)["Body"].read()]

        (key,) = wait_for(flushed_with_the_mark, timeout=60, interval=0.5)
        # the flush's answer names the object it wrote
        expect(page.locator("#notice")).to_contain_text(key)
        row = page.locator(f'#delivered-objects tr[data-id="{key}"]')
        expect(row).to_be_visible()
        console.shot(page, "delivery-stream")
        # each object links to the bucket's page, which opens it
        row.locator(f'a[href^="{PREFIX}/buckets/{pipeline.bucket}"]').first.click()
        expect(page).to_have_url(re.compile(re.escape(f"{PREFIX}/buckets/{pipeline.bucket}")))
        expect(page.locator("#object-preview")).to_contain_text(mark)


def test_bucket_page_lists_and_previews_delivered_objects(console, pipeline):
    s3 = s3_client(pipeline.url)
    key = wait_for(lambda: object_keys(s3, pipeline.bucket, "events/"), timeout=120, interval=0.3)[0]
    folder = key[:key.rindex("/") + 1]
    first = json.loads(s3.get_object(Bucket=pipeline.bucket, Key=key)["Body"].read().splitlines()[0])
    value = str(next(iter(first.values())))
    with console.open(f"/buckets/{pipeline.bucket}") as page:
        expect(page.locator('#bucket-prefixes tr[data-id="events/"]')).to_be_visible()
        console.shot(page, "bucket")
    with console.open(f"/buckets/{pipeline.bucket}?prefix={folder}", name="bucket-folder") as page:
        row = page.locator(f'#bucket-objects tr[data-id="{key}"]')
        expect(row.locator("a.download")).to_be_visible()
        row.locator(".preview").click()
        expect(page.locator("#object-preview")).to_contain_text(value)
        console.shot(page, "bucket-preview")


def test_queues_topics_and_log_groups_pages_list_theirs(console, pipeline):
    with console.open("/queues") as page:
        expect(page.locator("#queues")).to_contain_text(pipeline.queue)
        console.shot(page, "queues")
    with console.open("/topics") as page:
        expect(page.locator("#topics")).to_contain_text(pipeline.topic_arn.split(":")[-1])
        expect(page.locator("#subscriptions")).to_contain_text(pipeline.queue)
        console.shot(page, "topics")
    with console.open("/log-groups") as page:
        expect(page.locator("#log-groups")).to_contain_text(pipeline.log_group)
        expect(page.locator("#log-groups")).to_contain_text(f"/aws/lambda/{pipeline.function}")
        console.shot(page, "log-groups")


# how pages read: counts, names, charts

# "1 objects", "1 records"...: a count of one with a plural noun.
ONE_MANY = re.compile(r"(?<![\d,.])1 (open )?(objects|records|errors|readers|shards|streams|days|batches|files|rows|"
                      r"dead letters|subscriptions|endpoints|user records|row groups)\b")

# The words of `selector`'s elements that the page broke across lines: each text node (KS.breakable
# ends one at each <wbr>) must keep every one of its words on one line.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const node of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      for (const m of text.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(text, m.index);
        range.setEnd(text, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""

# Where a chart's axis labels fall on its canvas (device pixels): [[left, right, text]] for the
# time axis, the widest value label against the value axis' width, and the span of its x scale.
CHART_LABELS = """(id) => {
  const u = document.getElementById(id).plot;
  const [x, y] = u.axes;
  u.ctx.font = x.font[0];
  const labels = x._values.map((text, i) => {
    const at = u.valToPos(x._splits[i], "x", true), width = u.ctx.measureText(text).width;
    return [at - width / 2, at + width / 2, text];
  }).filter(([left, right, text]) => text !== null && right >= u.bbox.left - 1 && left <= u.bbox.left + u.bbox.width + 1);
  u.ctx.font = y.font[0];
  const widest = Math.max(...y._values.map((v) => u.ctx.measureText(v).width));
  return {labels, canvas: u.ctx.canvas.width, widest, axis: y._size * devicePixelRatio,
          span: u.scales.x.max - u.scales.x.min};
}"""


def check_chart(page, chart_id: str) -> None:
    """The chart's time labels are one line each, apart, and inside the canvas; its value labels
    fit their axis; its time span is minutes, not the years uPlot gave a chart of one point."""
    expect(page.locator(f"#{chart_id} canvas").first).to_be_attached()
    found = page.evaluate(CHART_LABELS, chart_id)
    labels = found["labels"]
    assert len(labels) >= 2, found
    assert all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", text) for _, _, text in labels), found
    assert labels[0][0] >= 0 and labels[-1][1] <= found["canvas"], found  # none cut at an edge
    for (_, right, _), (left, _, _) in zip(labels, labels[1:]):
        assert left - right >= 8, found  # none touching the next
    assert found["widest"] < found["axis"], found
    assert 0 < found["span"] <= 3600, found


def test_overview_names_mappings_by_what_they_connect_and_counts_agree(console, pipeline):
    (mapping,) = pipeline.client("lambda").list_event_source_mappings(FunctionName=pipeline.function)["EventSourceMappings"]
    with console.open("/") as page:
        row = page.locator(f'#overview-mappings tr[data-id="{mapping["UUID"]}"]')
        expect(row.locator("td.name a")).to_have_text(f"{pipeline.function} ← {pipeline.stream}")
        expect(row.locator("td.name a")).to_have_attribute("href", f"{PREFIX}/functions/{pipeline.function}")
        expect(row.locator("td.name .detail")).to_have_text(mapping["UUID"])
        expect(page.locator("#overview-buckets")).to_contain_text(re.compile(r"\d+ objects? · "))
        expect(page.locator("#main")).not_to_contain_text(ONE_MANY)
        # A narrow window: names wrap, at their parts (shop-|handle), never inside one.
        for width in (1360, 980, 760):
            page.set_viewport_size({"width": width, "height": 900})
            expect(page.locator("#overview-mappings td.name")).to_be_visible()
            assert page.evaluate(BROKEN_WORDS, "td.name, h1") == [], width
        console.shot(page, "overview-narrow")


def test_charts_labels_neither_overlap_nor_clip(console, pipeline):
    with console.open(f"/streams/{pipeline.stream}") as page:
        for chart in ("chart-write-rate", "chart-lag"):
            check_chart(page, chart)
            console.shot_of(page.locator(f"#{chart}"), chart)
    with console.open(f"/functions/{pipeline.function}") as page:
        for chart in ("chart-invocations", "chart-duration"):
            check_chart(page, chart)
            console.shot_of(page.locator(f"#{chart}"), chart)
    with console.open(f"/delivery-streams/{pipeline.delivery}") as page:
        for chart in ("chart-records", "chart-bytes"):
            check_chart(page, chart)
            console.shot_of(page.locator(f"#{chart}"), chart)


def test_queries_page_without_queries_says_so(console):
    with console.open("/queries") as page:
        expect(page.locator("p.empty#queries")).to_be_visible()
        console.shot(page, "queries")


# what keeps other web sites out

def test_console_pages_forbid_framing_and_foreign_sources(pipeline):
    with urllib.request.urlopen(f"{pipeline.url}{PREFIX}/streams/{pipeline.stream}") as answer:
        headers = answer.headers
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


def test_another_site_can_neither_read_the_console_nor_split_through_it(console, console_browser, pipeline):
    kinesis = pipeline.client()
    stream = marker("guarded")
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    wait_for(lambda: kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE")
    # what the console's own page reads and sends to split: captured, the split itself held back
    with console.open(f"/streams/{stream}", name="stream-guarded") as page:
        page.route("**/_kinesim/console/api/**",
                   lambda route: route.abort() if route.request.method == "POST" else route.continue_())
        read = page.wait_for_event("request", lambda r: r.method == "GET" and f"/api/streams/{stream}" in r.url)
        expect(page.locator("#split-hash")).to_have_value(re.compile(r"^\d+$"))
        with page.expect_request(lambda r: r.method == "POST") as action:
            page.locator("#split-submit").click()
        split = action.value
    split_url, split_body, read_url = split.url, split.post_data, read.url
    assert "/split" in split_url, split_url
    assert open_shards(kinesis, stream) == 1  # held back indeed

    with foreign_origin() as origin:
        context = console_browser.new_context()
        try:
            page = context.new_page()
            page.goto(origin + "/")
            outcome = page.evaluate("""async ([readUrl, splitUrl, body]) => {
                const attempt = async (url, init) => {
                    try { const r = await fetch(url, init); return r.type === "opaque" ? "opaque" : "read " + r.status; }
                    catch (err) { return err.name; }
                };
                return {
                    read: await attempt(readUrl, {}),
                    split: await attempt(splitUrl, {method: "POST", headers: {"Content-Type": "application/json"}, body}),
                    blind: await attempt(splitUrl, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body}),
                };
            }""", [read_url, split_url, split_body])
            # the browser got no answer it may read, and the JSON action's preflight was refused
            assert outcome == {"read": "TypeError", "split": "TypeError", "blind": "opaque"}, outcome
            # a form of that site posting to the action: refused by the server
            with page.expect_response(split_url) as answered:
                page.evaluate("""([url, fields]) => {
                    const form = document.createElement("form");
                    form.method = "POST"; form.action = url;
                    for (const [k, v] of Object.entries(fields)) {
                        const input = document.createElement("input");
                        input.name = k; input.value = String(v); form.append(input);
                    }
                    document.body.append(form); form.submit();
                }""", [split_url, json.loads(split_body)])
            assert answered.value.status in (403, 415), answered.value.status
        finally:
            context.close()
    # a form post without the browser: with another site's Origin, or none at all
    for origin_header in ({"Origin": "http://127.0.0.2:8000"}, {}):
        status = post_form(split_url, json.loads(split_body), origin_header)
        assert status in (403, 415), (origin_header, status)
    assert open_shards(kinesis, stream) == 1
    assert len(kinesis.list_shards(StreamName=stream)["Shards"]) == 1


def open_shards(kinesis, stream: str) -> int:
    return kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["OpenShardCount"]


def post_form(url: str, fields: dict, headers: dict) -> int:
    body = urllib.parse.urlencode({k: str(v) for k, v in fields.items()}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", **headers})
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code
