"""The web console's bucket API against a real server: folders and objects one level at a time,
bounded previews (JSON lines, text, gzip, Parquet, binary as hex, a gzip bomb capped; Parquet and ORC
files declaring far more than their size, which cost the server nothing), downloads, keys that would
leave the bucket refused, and the overview rows."""
from __future__ import annotations

import gzip
import io
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib
from email.message import Message

import pytest

from conftest import client_for, start_server
from health_probe import peak_resident_bytes
from kinesim.config import Settings
from kinesim.server import InProcessServer, free_port
from kinesim.webconsole import buckets

API = "/_kinesim/console/api/buckets"


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
    name = "bkt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name)
    return name


def fetch(url: str) -> tuple[int, Message, bytes]:
    """Status, headers (names in any case) and body."""
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def listing(server, bucket: str, **query) -> tuple[int, dict]:
    status, _, body = fetch(f"{server.url}{API}/{bucket}?{urllib.parse.urlencode(query)}")
    return status, json.loads(body)


def preview(server, bucket: str, key: str) -> tuple[int, dict]:
    status, _, body = fetch(f"{server.url}{API}/{bucket}/preview?{urllib.parse.urlencode({'key': key})}")
    return status, json.loads(body)


def test_folders_and_objects_one_level_at_a_time(server, s3, bucket):
    for key in ("top.txt", "a/one.json", "a/two.json", "a/b/deep.txt", "logs/x"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    status, doc = listing(server, bucket)
    assert status == 200 and doc["name"] == bucket and doc["region"] == "us-east-1"
    assert [p["prefix"] for p in doc["prefixes"]] == ["a/", "logs/"]
    assert [(o["key"], o["size"]) for o in doc["objects"]] == [("top.txt", 7)]
    assert doc["objects"][0]["last_modified"] > 1_600_000_000_000 and doc["truncated"] is False
    status, doc = listing(server, bucket, prefix="a/")
    assert [p["prefix"] for p in doc["prefixes"]] == ["a/b/"]
    assert [(o["key"], o["name"]) for o in doc["objects"]] == [("a/one.json", "one.json"), ("a/two.json", "two.json")]
    assert doc["parents"] == [{"name": "a/", "prefix": "a/"}]
    status, doc = listing(server, bucket, prefix="a/b/")
    assert [o["key"] for o in doc["objects"]] == ["a/b/deep.txt"] and doc["prefixes"] == []
    status, doc = listing(server, bucket, prefix="a/", after="a/one.json")
    assert [o["key"] for o in doc["objects"]] == ["a/two.json"]
    status, doc = listing(server, "no-such-bucket-here")
    assert status == 404 and doc["code"] == "NoSuchBucket"


def test_keys_and_prefixes_never_leave_the_bucket(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="inside/file", Body=b"mine")
    for prefix in ("../", "inside/../../", "/"):
        status, doc = listing(server, bucket, prefix=prefix)
        assert status == 200 and doc["objects"] == [] and doc["prefixes"] == []
    for key in ("../x", "inside/../../etc/passwd", "/etc/passwd", "..", "inside/./file"):
        status, doc = preview(server, bucket, key)
        assert status == 400 and doc["code"] == "InvalidArgument", key
        status, _, body = fetch(f"{server.url}{API}/{bucket}/download?{urllib.parse.urlencode({'key': key})}")
        assert status == 400 and json.loads(body)["code"] == "InvalidArgument"
    status, doc = preview(server, bucket, "inside/missing")
    assert status == 404 and doc["code"] == "NoSuchKey"


def test_previews_of_json_lines_text_and_gzip(server, s3, bucket):
    lines = b"".join(json.dumps({"n": i, "page": f"/p{i}"}).encode() + b"\n" for i in range(80))
    s3.put_object(Bucket=bucket, Key="j.json", Body=lines)
    status, doc = preview(server, bucket, "j.json")
    assert status == 200 and (doc["kind"], doc["format"], doc["compression"]) == ("json", "json", None)
    assert doc["records"][:2] == [{"n": 0, "page": "/p0"}, {"n": 1, "page": "/p1"}] and len(doc["records"]) == 50
    assert [c["name"] for c in doc["columns"]] == ["n", "page"] and doc["rows"][49] == [49, "/p49"]
    assert doc["size"] == len(lines) and doc["truncated"] is False
    # Firehose writes records back to back when they have no delimiter.
    s3.put_object(Bucket=bucket, Key="glued", Body=b'{"a":1}{"a":2} {"a":[3]}')
    assert preview(server, bucket, "glued")[1]["records"] == [{"a": 1}, {"a": 2}, {"a": [3]}]

    s3.put_object(Bucket=bucket, Key="t.txt", Body="hello\nwörld\n".encode())
    doc = preview(server, bucket, "t.txt")[1]
    assert (doc["kind"], doc["text"], doc["truncated"]) == ("text", "hello\nwörld\n", False)
    big = ("line of text\n" * 20000).encode()
    s3.put_object(Bucket=bucket, Key="big.txt", Body=big)
    doc = preview(server, bucket, "big.txt")[1]
    assert doc["kind"] == "text" and doc["truncated"] is True and doc["text"] == big[:64 << 10].decode()

    s3.put_object(Bucket=bucket, Key="j.gz", Body=gzip.compress(lines), ContentEncoding="gzip")
    doc = preview(server, bucket, "j.gz")[1]
    assert (doc["kind"], doc["compression"], doc["content_encoding"]) == ("json", "gzip", "gzip")
    assert doc["records"][79 - 30] == {"n": 49, "page": "/p49"} and doc["text"] == lines.decode()
    # Two gzip members one after the other are one stream (what `cat a.gz b.gz` makes).
    s3.put_object(Bucket=bucket, Key="two.gz", Body=gzip.compress(b"first\n") + gzip.compress(b"second\n"))
    assert preview(server, bucket, "two.gz")[1]["text"] == "first\nsecond\n"


def test_a_gzip_bomb_is_inflated_only_up_to_the_limit(server, s3, bucket):
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"a" * (1 << 20)
    bomb = b"".join(packer.compress(chunk) for _ in range(512)) + packer.flush()   # 512 MiB of text
    assert len(bomb) < 1 << 20
    s3.put_object(Bucket=bucket, Key="bomb.gz", Body=bomb)
    status, doc = preview(server, bucket, "bomb.gz")
    assert status == 200 and doc["compression"] == "gzip" and doc["truncated"] is True
    assert doc["kind"] == "text" and doc["text"] == "a" * (64 << 10)
    # Not gzip after all: shown as bytes.
    s3.put_object(Bucket=bucket, Key="fake.gz", Body=b"\x1f\x8b" + b"garbage" * 10)
    doc = preview(server, bucket, "fake.gz")[1]
    assert doc["kind"] == "binary" and "gzip" in doc["note"]


def test_previews_of_parquet_and_binary(server, s3, bucket):
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({"page": [f"/p{i}" for i in range(120)], "n": list(range(120)),
                      "raw": [bytes([i % 256]) * 3 for i in range(120)]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    s3.put_object(Bucket=bucket, Key="t.parquet", Body=sink.getvalue())
    status, doc = preview(server, bucket, "t.parquet")
    assert status == 200 and (doc["kind"], doc["format"]) == ("table", "parquet")
    assert doc["columns"] == [{"name": "page", "type": "string"}, {"name": "n", "type": "int64"},
                              {"name": "raw", "type": "binary"}]
    assert doc["total_rows"] == 120 and len(doc["rows"]) == 50 and doc["truncated"] is True
    assert doc["rows"][3] == ["/p3", 3, "0x030303"] and doc["rows"][49] == ["/p49", 49, "111"]

    data = bytes(range(256)) * 8
    s3.put_object(Bucket=bucket, Key="blob.bin", Body=data)
    doc = preview(server, bucket, "blob.bin")[1]
    assert (doc["kind"], doc["truncated"]) == ("binary", True) and len(doc["hex"]) == 64
    assert doc["hex"][0] == "00000000: 0001 0203 0405 0607 0809 0a0b 0c0d 0e0f  ................"
    assert doc["hex"][4].endswith("@ABCDEFGHIJKLMNO")
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert preview(server, bucket, "empty")[1]["kind"] == "empty"
    s3.put_object(Bucket=bucket, Key="broken.parquet", Body=b"PAR1" + b"\x00" * 100)
    doc = preview(server, bucket, "broken.parquet")[1]
    assert doc["kind"] == "binary" and doc["format"] == "parquet" and doc["note"]


# Before previews were decoded in a child process, these cost the server 660 MB (ORC, 10 million
# rows), 250 MB (ORC, one list of 10 million items) and 1.1 GB (Parquet, 50 rows of a 20 MB string
# held once in a dictionary): more than this bound, which leaves room for the server's own work.
PREVIEW_GROWTH_BOUND = 150 << 20


def _orc_bytes(table) -> bytes:
    import pyarrow.orc as orc
    sink = io.BytesIO()
    orc.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _previewed_within_bound(server, bucket: str, key: str) -> dict:
    """The preview of `key`, checking that it did not raise the server's peak memory by more than
    PREVIEW_GROWTH_BOUND."""
    before = peak_resident_bytes(server.proc.pid)
    status, doc = preview(server, bucket, key)
    grew = peak_resident_bytes(server.proc.pid) - before
    assert status == 200, doc
    assert grew < PREVIEW_GROWTH_BOUND, f"the preview of {key} raised the server's peak memory by {grew >> 20} MiB"
    return doc


def test_a_table_declaring_millions_of_rows_is_read_fifty_rows_at_a_time(server, s3, bucket):
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = 10_000_000
    seven = pa.repeat(pa.scalar(7, pa.int64()), rows)
    table = pa.table({f"c{i}": seven for i in range(8)})
    data = _orc_bytes(table)
    assert len(data) < 64 << 10  # 10 million rows of 8 columns, in a few tens of KB
    s3.put_object(Bucket=bucket, Key="rows.orc", Body=data)
    doc = _previewed_within_bound(server, bucket, "rows.orc")
    assert (doc["kind"], doc["format"], doc["total_rows"], doc["stripes"]) == ("table", "orc", rows, 1)
    assert [c["name"] for c in doc["columns"]] == [f"c{i}" for i in range(8)] and doc["truncated"] is True
    assert doc["rows"] == [[7] * 8] * 50

    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=rows, compression="zstd", data_page_size=1 << 30)
    s3.put_object(Bucket=bucket, Key="rows.parquet", Body=sink.getvalue())
    doc = _previewed_within_bound(server, bucket, "rows.parquet")
    assert (doc["kind"], doc["total_rows"], doc["row_groups"], doc["rows"]) == ("table", rows, 1, [[7] * 8] * 50)


def test_a_huge_cell_is_cut_and_rows_too_large_to_read_are_refused(server, s3, bucket):
    import pyarrow as pa
    import pyarrow.parquet as pq
    items = 10_000_000
    one_list = pa.ListArray.from_arrays(pa.array([0, items], pa.int32()), pa.repeat(pa.scalar(7, pa.int64()), items))
    data = _orc_bytes(pa.table({"l": one_list, "n": [1]}))
    assert len(data) < 4096
    s3.put_object(Bucket=bucket, Key="list.orc", Body=data)
    doc = _previewed_within_bound(server, bucket, "list.orc")
    assert (doc["kind"], doc["total_rows"]) == ("table", 1)
    cell, n = doc["rows"][0]
    assert n == 1 and cell[:3] == [7, 7, 7] and cell[-1] == "…" and len(json.dumps(cell)) < 4096

    # 50 rows of one 20 MB string, which the file holds once (a dictionary page): 1 KB on disk, 1 GB
    # decoded, more than a preview may use.
    text = pa.DictionaryArray.from_arrays(pa.array([0] * 50, pa.int32()), pa.array(["a" * (20 << 20)]))
    sink = io.BytesIO()
    pq.write_table(pa.table({"s": text}), sink, compression="zstd", dictionary_pagesize_limit=1 << 30)
    assert len(sink.getvalue()) < 4096
    s3.put_object(Bucket=bucket, Key="dictionary.parquet", Body=sink.getvalue())
    doc = _previewed_within_bound(server, bucket, "dictionary.parquet")
    assert (doc["kind"], doc["format"]) == ("binary", "parquet") and doc["hex"]
    assert doc["note"].startswith("not previewed: ") and "MiB" in doc["note"], doc["note"]
    # and the server previews the next file as before
    assert preview(server, bucket, "list.orc")[1]["kind"] == "table"


def test_download_is_the_objects_bytes_as_an_attachment(server, s3, bucket):
    data = bytes(range(256)) * 5000
    s3.put_object(Bucket=bucket, Key="dir/file.bin", Body=data)
    status, headers, body = fetch(f"{server.url}{API}/{bucket}/download?key=dir/file.bin")
    assert status == 200 and body == data
    assert headers["Content-Disposition"] == "attachment; filename=file.bin"
    assert headers["Content-Type"] == "application/octet-stream" and headers["X-Content-Type-Options"] == "nosniff"
    # A page stored in a bucket never runs as a page of the console.
    s3.put_object(Bucket=bucket, Key="page.html", Body=b"<script>alert(1)</script>", ContentType="text/html")
    status, headers, body = fetch(f"{server.url}{API}/{bucket}/download?key=page.html")
    assert headers["Content-Type"] == "application/octet-stream" and headers["Content-Disposition"].startswith("attachment")
    status, _, body = fetch(f"{server.url}{API}/{bucket}/download?key=dir/none")
    assert status == 404 and json.loads(body)["code"] == "NoSuchKey"


def test_overview_rows(tmp_path):
    server = InProcessServer(Settings(port=free_port(), data_dir=str(tmp_path / "data"), log_level="warning")).start()
    try:
        s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
        s3.create_bucket(Bucket="empty-one")
        s3.create_bucket(Bucket="full-one")
        s3.create_bucket(Bucket="single-one")
        for key, size in (("a", 10), ("b/c", 20), ("b/d/e", 30)):
            s3.put_object(Bucket="full-one", Key=key, Body=b"x" * size)
        s3.put_object(Bucket="single-one", Key="only", Body=b"x")
        rows = {r["name"]: r for r in buckets.overview_rows(server.edge.own_scope)["buckets"]}
        assert set(rows) == {"empty-one", "full-one", "single-one"}
        assert rows["full-one"]["figures"] == {"objects": 3, "bytes": 60}
        assert rows["full-one"]["href"] == "/_kinesim/console/buckets/full-one"
        assert rows["full-one"]["health"] == "3 objects · 60 B"
        assert rows["single-one"]["health"] == "1 object · 1 B"  # not "1 objects"
        assert rows["empty-one"]["figures"] == {"objects": 0, "bytes": 0}
        assert rows["empty-one"]["health"] == "0 objects · 0 B"
    finally:
        server.stop()
