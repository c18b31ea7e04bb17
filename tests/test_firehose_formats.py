"""firehose.compression and firehose.conversion: the bytes of delivered objects."""
from __future__ import annotations

import gzip
import io
import json
import os
import struct
import subprocess
import sys
import uuid
import zipfile
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import cramjam
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from firehose import compression, conversion, hive_types, json_timestamps

# Compressible, more than two 32 KiB blocks, and not a multiple of the block size.
PAYLOAD = b"".join(json.dumps({"seq": i, "page": f"/p/{i % 7}"}).encode() + b"\n" for i in range(3000))


# ------------------------------------------------------------------ compression


@pytest.mark.parametrize("fmt", compression.FORMATS)
def test_every_format_round_trips(fmt):
    for data in (PAYLOAD, b"x", os.urandom(70_000)):
        assert compression.decompress(compression.compress(data, fmt), fmt) == data


def test_extensions_and_content_encodings_are_awss():
    table = {fmt: (compression.extension(fmt), compression.content_encoding(fmt)) for fmt in compression.FORMATS}
    assert table == {
        "UNCOMPRESSED": ("", None),
        "GZIP": (".gz", "gzip"),
        "ZIP": (".zip", "zip"),
        "Snappy": (".snappy", "snappy-java"),
        "HADOOP_SNAPPY": (".snappy", "hadoop-snappy"),
    }
    assert compression.extension(None) == ""
    with pytest.raises(ValueError):
        compression.extension("SNAPPY")  # AWS's enum is case-sensitive


def test_uncompressed_is_the_records_as_they_are():
    assert compression.compress(PAYLOAD, "UNCOMPRESSED") == PAYLOAD


def test_gzip_is_read_by_the_gzip_module():
    body = compression.compress(PAYLOAD, "GZIP")
    assert body[:2] == b"\x1f\x8b"
    assert gzip.decompress(body) == PAYLOAD


def test_zip_holds_one_deflated_entry_named_with_a_uuid():
    with zipfile.ZipFile(io.BytesIO(compression.compress(PAYLOAD, "ZIP"))) as archive:
        (info,) = archive.infolist()
        assert info.compress_type == zipfile.ZIP_DEFLATED
        uuid.UUID(info.filename)
        assert archive.read(info) == PAYLOAD


def test_snappy_is_snappy_javas_stream_format():
    body = compression.compress(PAYLOAD, "Snappy")
    # Header: magic, version 1, compatible version 1.
    assert body[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # Then per 32 KiB block: big-endian length, raw snappy block.
    offset, out = 16, b""
    blocks = 0
    while offset < len(body):
        (length,) = struct.unpack_from(">i", body, offset)
        block = bytes(cramjam.snappy.decompress_raw(body[offset + 4: offset + 4 + length]))
        assert len(block) == min(32 * 1024, len(PAYLOAD) - len(out))
        out += block
        offset += 4 + length
        blocks += 1
    assert out == PAYLOAD and blocks == -(-len(PAYLOAD) // (32 * 1024))
    # It is not the official snappy framing format.
    with pytest.raises(Exception):
        bytes(cramjam.snappy.decompress(body))


def test_hadoop_snappy_block_header_by_hand():
    body = compression.compress(PAYLOAD, "HADOOP_SNAPPY")
    uncompressed, compressed = struct.unpack_from(">ii", body, 0)
    assert uncompressed == 32 * 1024
    first_block = bytes(cramjam.snappy.decompress_raw(body[8: 8 + compressed]))
    assert first_block == PAYLOAD[: 32 * 1024]
    # The next block starts right after the first one.
    second_uncompressed, _ = struct.unpack_from(">ii", body, 8 + compressed)
    assert second_uncompressed == 32 * 1024


def test_hadoop_snappy_reads_blocks_of_several_chunks():
    # Hadoop's own BlockCompressorStream may split a block into several compressed chunks.
    first, second = PAYLOAD[:1000], PAYLOAD[1000:1500]
    chunks = [bytes(cramjam.snappy.compress_raw(part)) for part in (first, second)]
    body = struct.pack(">i", 1500) + b"".join(struct.pack(">i", len(c)) + c for c in chunks)
    # ... and ends an empty stream with a zero-length block.
    empty = bytes(cramjam.snappy.compress_raw(b""))
    body += struct.pack(">ii", 0, len(empty)) + empty
    assert compression.decompress(body, "HADOOP_SNAPPY") == PAYLOAD[:1500]


def test_truncated_snappy_streams_are_errors():
    for fmt in ("Snappy", "HADOOP_SNAPPY"):
        body = compression.compress(PAYLOAD, fmt)
        with pytest.raises(ValueError):
            compression.decompress(body[:-10], fmt)
    with pytest.raises(ValueError):
        compression.decompress(b"not snappy at all", "Snappy")


# ------------------------------------------------------------------- conversion


def dfcc(serializer: dict | None = None, deserializer: dict | None = None, **schema) -> dict:
    return {
        "Enabled": True,
        "SchemaConfiguration": {"DatabaseName": "db", "TableName": "clicks", "RoleARN": "arn:aws:iam::1:role/r",
                                **schema},
        "InputFormatConfiguration": {"Deserializer": deserializer or {"OpenXJsonSerDe": {}}},
        "OutputFormatConfiguration": {"Serializer": serializer or {"ParquetSerDe": {}}},
    }


COLUMNS = [
    {"Name": "page", "Type": "string"},
    {"Name": "user_id", "Type": "bigint"},
    {"Name": "score", "Type": "double"},
    {"Name": "ok", "Type": "boolean"},
    {"Name": "ts", "Type": "timestamp"},
    {"Name": "day", "Type": "date"},
    {"Name": "price", "Type": "decimal(10,2)"},
    {"Name": "tags", "Type": "array<string>"},
    {"Name": "attrs", "Type": "map<string,int>"},
    {"Name": "device", "Type": "struct<kind:string,version:int>"},
]


def parquet(body: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(body))


def test_parquet_has_the_glue_schema_and_values():
    record = json.dumps({
        "page": "/home", "user_id": 42, "score": 1.5, "ok": True, "ts": "2017-02-07T15:13:01.39256Z",
        "day": "2024-01-02", "price": 9.99, "tags": ["a", "b"], "attrs": {"x": 1},
        "device": {"kind": "mobile", "version": 3}, "ignored": "not in the schema",
    }).encode()
    body, errors = conversion.convert([record, b'{"page": "/about"}\n'], dfcc(), columns=COLUMNS)
    assert errors == []
    assert body[:4] == b"PAR1"
    table = parquet(body)
    assert table.schema == pa.schema([
        ("page", pa.string()), ("user_id", pa.int64()), ("score", pa.float64()), ("ok", pa.bool_()),
        ("ts", pa.timestamp("us", tz="UTC")), ("day", pa.date32()), ("price", pa.decimal128(10, 2)),
        ("tags", pa.list_(pa.field("element", pa.string()))),
        ("attrs", pa.map_(pa.string(), pa.int32())),
        ("device", pa.struct([("kind", pa.string()), ("version", pa.int32())])),
    ])
    first, second = table.to_pylist()
    assert first == {
        "page": "/home", "user_id": 42, "score": 1.5, "ok": True,
        "ts": datetime(2017, 2, 7, 15, 13, 1, 392560, tzinfo=timezone.utc), "day": date(2024, 1, 2),
        "price": Decimal("9.99"), "tags": ["a", "b"], "attrs": [("x", 1)], "device": {"kind": "mobile", "version": 3},
    }
    assert second["page"] == "/about" and second["user_id"] is None
    # Spark-readable timestamps: INT64 microseconds adjusted to UTC, not INT96 nor nanoseconds.
    ts_column = pq.ParquetFile(io.BytesIO(body)).schema.column(4)
    assert ts_column.physical_type == "INT64"
    assert "isAdjustedToUTC=true, timeUnit=microseconds" in str(ts_column.logical_type)


def test_bad_records_go_to_the_errors_with_awss_messages():
    records = [
        b'{"page": "/ok", "user_id": "7"}',
        b"   \n",
        b"this is not json",
        b"42",
        b'[{"page": "/a"}, {"page": "/b"}]',
        b'{"user_id": "seven"}',
        b'{"device": 42}',
        b'{"page": "/fine"}{"user_id": 1.5}',  # one bad object fails the whole record
    ]
    body, errors = conversion.convert(records, dfcc(), columns=COLUMNS)
    assert parquet(body).column("page").to_pylist() == ["/ok"]
    assert parquet(body).column("user_id").to_pylist() == [7]  # OpenX reads numbers given as text
    assert errors == [
        (b"   \n", "The record was empty or contained only whitespace."),
        (b"this is not json", "Encountered malformed JSON."),
        (b"42", "The input JSON contained a primitive at the top level. The top level must be an object or array."),
        (b'[{"page": "/a"}, {"page": "/b"}]', "Data does not match the schema."),
        (b'{"user_id": "seven"}', 'Data does not match the schema. For input string: "seven"'),
        (b'{"device": 42}', "Data does not match the schema. Data is not JSONObject  but java.lang.Long with value 42"),
        (b'{"page": "/fine"}{"user_id": 1.5}', 'Data does not match the schema. For input string: "1.5"'),
    ]
    assert [conversion.error_code(message) for _, message in errors[:3]] == [
        "DataFormatConversion.MalformedData", "DataFormatConversion.ParseError", "DataFormatConversion.MalformedData",
    ]


def test_nothing_converted_gives_no_object():
    body, errors = conversion.convert([b"nope"], dfcc(), columns=COLUMNS)
    assert body is None and len(errors) == 1


def test_several_objects_per_record_become_rows():
    body, errors = conversion.convert([b'{"page":"/a"}{"page":"/b"}\n{"page":"/c"}\n'], dfcc(), columns=COLUMNS)
    assert errors == [] and parquet(body).column("page").to_pylist() == ["/a", "/b", "/c"]


def test_openx_options_case_dots_and_column_mappings():
    columns = [{"Name": "ts", "Type": "bigint"}, {"Name": "a_b", "Type": "string"}, {"Name": "userid", "Type": "int"}]
    openx = {"OpenXJsonSerDe": {"ConvertDotsInJsonKeysToUnderscores": True, "ColumnToJsonKeyMappings": {"ts": "timestamp"}}}
    record = b'{"timestamp": 5, "a.b": "dotted", "UserId": 3}'
    body, errors = conversion.convert([record], dfcc(deserializer=openx), columns=columns)
    assert errors == [] and parquet(body).to_pylist() == [{"ts": 5, "a_b": "dotted", "userid": 3}]
    case_sensitive = {"OpenXJsonSerDe": {"CaseInsensitive": False}}
    body, _ = conversion.convert([record], dfcc(deserializer=case_sensitive), columns=columns)
    assert parquet(body).to_pylist() == [{"ts": None, "a_b": None, "userid": None}]


def test_openx_turns_nested_json_into_text_and_reads_epoch_timestamps():
    columns = [{"Name": "payload", "Type": "string"}, {"Name": "ts", "Type": "timestamp"}]
    records = [b'{"payload": {"a": [1, 2]}, "ts": 1518033528}', b'{"payload": 7, "ts": 1518033528123}',
               b'{"payload": true, "ts": 1518033528.5}', b'{"ts": "2017-02-07 15:13:01.14"}']
    body, errors = conversion.convert(records, dfcc(), columns=columns)
    assert errors == []
    rows = parquet(body).to_pylist()
    assert [r["payload"] for r in rows] == ['{"a":[1,2]}', "7", "true", None]
    assert [r["ts"] for r in rows] == [
        datetime(2018, 2, 7, 19, 58, 48, tzinfo=timezone.utc),
        datetime(2018, 2, 7, 19, 58, 48, 123000, tzinfo=timezone.utc),
        datetime(2018, 2, 7, 19, 58, 48, 500000, tzinfo=timezone.utc),
        datetime(2017, 2, 7, 15, 13, 1, 140000, tzinfo=timezone.utc),
    ]


def test_hive_serde_is_strict_and_uses_its_timestamp_formats():
    hive = {"HiveJsonSerDe": {"TimestampFormats": ["yyyy-MM-dd'T'HH:mm:ss.SSSZ", "millis"]}}
    columns = [{"Name": "n", "Type": "int"}, {"Name": "s", "Type": "string"}, {"Name": "t", "Type": "timestamp"}]
    records = [
        b'{"N": 1, "t": "2020-01-02T03:04:05.678+0100"}',
        b'{"n": 2, "t": 1600000000000}',
        b'{"n": 3, "t": "2020-1-2 3:04:05.5"}',  # java.sql.Timestamp.valueOf, the default
        b'{"n": "4"}',
        b'{"s": {"nested": 1}}',
        b'{"t": "02/01/2020"}',
    ]
    body, errors = conversion.convert(records, dfcc(deserializer=hive), columns=columns)
    assert parquet(body).to_pylist() == [
        {"n": 1, "s": None, "t": datetime(2020, 1, 2, 2, 4, 5, 678000, tzinfo=timezone.utc)},
        {"n": 2, "s": None, "t": datetime(2020, 9, 13, 12, 26, 40, tzinfo=timezone.utc)},
        {"n": 3, "s": None, "t": datetime(2020, 1, 2, 3, 4, 5, 500000, tzinfo=timezone.utc)},
    ]
    assert [record for record, _ in errors] == records[3:]
    assert errors[0][1] == 'Data does not match the schema. For input string: "4"'


def test_schema_from_the_configs_columns_extension():
    config = dfcc(Columns=[{"Name": "page", "Type": "varchar(20)"}])
    body, _ = conversion.convert([b'{"page": "/x", "other": 1}'], config)
    assert parquet(body).to_pylist() == [{"page": "/x"}]


def test_inferred_schema():
    records = [
        b'{"Page": "/a", "n": 1, "score": 1, "tags": ["x"], "device": {"kind": "tv"}, "maybe": null}',
        b'{"page": "/b", "n": 2, "score": 2.5, "mixed": 1, "device": {"version": 3}}',
        b'{"mixed": "text", "empty": {}}',
        b"not json",
    ]
    config = dfcc()
    assert conversion.infer_columns(records, config) == [
        {"Name": "page", "Type": "string"},
        {"Name": "n", "Type": "bigint"},
        {"Name": "score", "Type": "double"},
        {"Name": "tags", "Type": "array<string>"},
        {"Name": "device", "Type": "struct<kind:string,version:bigint>"},
        {"Name": "maybe", "Type": "string"},
        {"Name": "mixed", "Type": "string"},
        {"Name": "empty", "Type": "string"},
    ]
    body, errors = conversion.convert(records, config)
    assert [record for record, _ in errors] == [b"not json"]
    rows = parquet(body).to_pylist()
    assert rows[1]["score"] == 2.5 and rows[0]["device"] == {"kind": "tv", "version": None}
    assert [r["mixed"] for r in rows] == [None, "1", "text"]


def test_parquet_serde_options():
    columns = [{"Name": "page", "Type": "string"}]
    records = [b'{"page": "/a"}']
    for option, codec in (("SNAPPY", "SNAPPY"), ("GZIP", "GZIP"), ("UNCOMPRESSED", "UNCOMPRESSED"), (None, "SNAPPY")):
        serde = {"ParquetSerDe": {"Compression": option} if option else {}}
        body, _ = conversion.convert(records, dfcc(serializer=serde), columns=columns)
        assert pq.ParquetFile(io.BytesIO(body)).metadata.row_group(0).column(0).compression == codec
    assert conversion.extension(dfcc()) == ".parquet"


def test_orc_output():
    serde = {"OrcSerDe": {"Compression": "ZLIB", "BloomFilterColumns": ["page"], "FormatVersion": "V0_11"}}
    body, errors = conversion.convert([b'{"page": "/a", "user_id": 1, "ts": 0}'], dfcc(serializer=serde),
                                      columns=COLUMNS)
    assert errors == [] and body[:3] == b"ORC"
    reader = orc.ORCFile(io.BytesIO(body))
    assert reader.compression == "ZLIB" and reader.file_version == "0.11"
    row = reader.read().to_pylist()[0]
    assert row["page"] == "/a" and row["user_id"] == 1
    assert row["ts"] == datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert conversion.extension(dfcc(serializer=serde)) == ".orc"
    default, _ = conversion.convert([b'{"page": "/a"}'], dfcc(serializer={"OrcSerDe": {}}), columns=COLUMNS)
    assert orc.ORCFile(io.BytesIO(default)).compression == "SNAPPY"


@pytest.mark.parametrize("serializer", [{"ParquetSerDe": {}}, {"OrcSerDe": {}}], ids=["parquet", "orc"])
def test_records_are_converted_a_chunk_at_a_time_into_the_same_file(monkeypatch, serializer):
    records = [json.dumps({"page": f"/p{i}", "n": i}).encode() * 3 for i in range(2000)]
    columns = [{"Name": "page", "Type": "string"}, {"Name": "n", "Type": "bigint"}]
    whole, _ = conversion.convert(records, dfcc(serializer=serializer), columns=columns)
    chunks: list[int] = []
    add = conversion._Output.add

    def counted(output, rows):
        chunks.append(len(rows))
        add(output, rows)
    monkeypatch.setattr(conversion, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(conversion, "ROW_GROUP_BYTES", 16 << 10)
    monkeypatch.setattr(conversion._Output, "add", counted)
    chunked, errors = conversion.convert(records, dfcc(serializer=serializer), columns=columns)
    # A record holds 3 rows: a chunk is the rows of 4096 bytes of records and of one more record.
    assert errors == [] and len(chunks) > 10 and max(chunks) <= 3 * (4096 // min(map(len, records)) + 1)
    read = (lambda body: orc.ORCFile(io.BytesIO(body)).read()) if "OrcSerDe" in serializer else parquet
    assert read(chunked).to_pylist() == read(whole).to_pylist()
    assert len(read(chunked)) == 6000
    if "ParquetSerDe" in serializer:
        assert pq.ParquetFile(io.BytesIO(chunked)).metadata.num_row_groups > 1


def test_conversion_holds_a_chunk_of_rows_not_the_whole_buffer():
    """Each row is Python objects until it is an Arrow batch: 37 bytes for each byte of `{"a":1}`
    records. 24 records of 896 KiB (a Firehose buffer holds up to 128 MiB) raised the peak by 700 MB
    when converted at once; a chunk at a time, by about 140 MB whatever the number of records."""
    script = """
import io, resource
import pyarrow.parquet as pq
from firehose import conversion
record = b'{"a":1}' * (1 << 17)
config = {"Enabled": True, "OutputFormatConfiguration": {"Serializer": {"ParquetSerDe": {}}}}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
body, errors = conversion.convert([record] * 24, config, columns=[{"Name": "a", "Type": "int"}])
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(grew << 10, pq.read_metadata(io.BytesIO(body)).num_rows, len(errors))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    grew, rows, errors = map(int, done.stdout.split())
    assert (rows, errors) == (24 << 17, 0)
    assert grew < 300 << 20, f"converting 21 MiB of records raised the peak memory by {grew >> 20} MiB"


def test_partitioned_parquet_directory_reads_as_one_dataset(tmp_path):
    columns = [{"Name": "page", "Type": "string"}, {"Name": "n", "Type": "bigint"}]
    for customer, records in {"a": [b'{"page": "/1", "n": 1}', b'{"page": "/2", "n": 2}'],
                              "b": [b'{"page": "/3", "n": 3}']}.items():
        body, _ = conversion.convert(records, dfcc(), columns=columns)
        folder = tmp_path / f"customer_id={customer}" / "year=2024"
        folder.mkdir(parents=True)
        (folder / "clicks-1-2024-01-01-00-00-00-x.parquet").write_bytes(body)
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    rows = sorted(table.to_pylist(), key=lambda r: r["n"])
    assert [(r["page"], r["customer_id"], r["year"]) for r in rows] == [("/1", "a", 2024), ("/2", "a", 2024),
                                                                        ("/3", "b", 2024)]


def test_unsupported_column_types_are_rejected():
    for bad in ("uniontype<int,string>", "array<int", "struct<a>", "struct<a:int", "map<string>", "nope", "int>"):
        with pytest.raises(ValueError):
            hive_types.hive_type(bad)
    assert hive_types.hive_type("ARRAY<STRUCT<`a-b`:DOUBLE PRECISION, c:char(3)>>") == pa.list_(
        pa.struct([("a-b", pa.float64()), ("c", pa.string())])
    )


def test_error_document_shape():
    document = json.loads(conversion.error_document(
        b'{"price": "oops"}', 'Data does not match the schema. For input string: "oops"',
        arrival_ms=1000, attempt_ending_ms=2000, schema_configuration=dfcc()["SchemaConfiguration"],
    ))
    assert document == {
        "attemptsMade": 1,
        "arrivalTimestamp": 1000,
        "lastErrorCode": "DataFormatConversion.MalformedData",
        "lastErrorMessage": 'Data does not match the schema. For input string: "oops"',
        "attemptEndingTimestamp": 2000,
        "rawData": "eyJwcmljZSI6ICJvb3BzIn0=",
        "dataCatalogTable": {"catalogId": None, "databaseName": "db", "tableName": "clicks", "region": None,
                             "versionId": "LATEST", "catalogArn": None},
    }


# ------------------------------------------------------------- hostile input

# Results of the `re`-based parser this replaced, for the formats Hive users write.
JODA_CASES = [
    ("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2024-01-02T03:04:05.678+0100", datetime(2024, 1, 2, 2, 4, 5, 678000)),
    ("EEE, dd MMM yyyy HH:mm:ss Z", "Tue, 02 Jan 2024 03:04:05 -0700", datetime(2024, 1, 2, 10, 4, 5)),
    ("dd/MMM/yyyy:HH:mm:ss Z", "02/Jan/2024:03:04:05 +0000", datetime(2024, 1, 2, 3, 4, 5)),
    ("MM/dd/yyyy hh:mm a", "01/02/2024 03:04 PM", datetime(2024, 1, 2, 15, 4)),
    ("EEEE, MMMM d, yyyy", "Tuesday, January 2, 2024", datetime(2024, 1, 2)),
    ("yyyy-DDD", "2024-032", datetime(2024, 2, 1)),
    ("h 'oclock' a", "3 oclock pm", datetime(1970, 1, 1, 15)),
    ("E'a'", "Mona", datetime(1970, 1, 1)),                      # a letter run gives back what follows needs
    ("yyyy-MM-dd HH:mm:ss", "٢٠٢٤-01-02 03:04:05", datetime(2024, 1, 2, 3, 4, 5)),  # any decimal digits
    ("yyyy-MM-dd", "2024-13-45", None),
    ("yyyy yyyy", "2024 2024", None),                             # a field given twice
    ("'unterminated", "x", None),
    ("yyyy-MM-dd Q", "2024-01-02 1", None),                       # a letter Hive does not know
]


@pytest.mark.parametrize("pattern,text,expected", JODA_CASES)
def test_joda_patterns(pattern, text, expected):
    assert json_timestamps.joda_parse(pattern, text) == (expected and expected.replace(tzinfo=timezone.utc))


@pytest.mark.timeout(10)
def test_a_timestamp_format_cannot_backtrack_for_ever():
    """`E` is a run of letters; `E'a'` fifteen times made `re` try every split of 60 letters
    (10 pairs: 2.5 s; the delivery thread held the interpreter, so the whole server waited)."""
    hostile = "E'a'" * 15 + "'b'"
    assert json_timestamps.joda_parse(hostile, "a" * 60) is None
    hive = {"HiveJsonSerDe": {"TimestampFormats": [hostile]}}
    body, errors = conversion.convert([b'{"t": "' + b"a" * 60 + b'"}'], dfcc(deserializer=hive),
                                      columns=[{"Name": "t", "Type": "timestamp"}])
    assert body is None and errors[0][1].startswith("Data does not match the schema.")


@pytest.mark.parametrize("columns", [None, [{"Name": "a", "Type": "string"}]], ids=["inferred", "given"])
def test_a_record_nested_too_deep_is_malformed(columns):
    # Before, json's RecursionError escaped the flush, which was then retried for ever. Records
    # nested about as deep as Python reads are converted or refused, depending on the stack left.
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    borderline = [b'{"a": ' + b"[" * depth + b"]" * depth + b"}" for depth in range(900, 1000, 10)]
    body, errors = conversion.convert([b'{"a": "fine"}', deep, *borderline], dfcc(), columns=columns)
    assert parquet(body).column("a").to_pylist()[0] == "fine"
    assert errors[0] == (deep, "Encountered malformed JSON.")


def test_an_integer_of_more_digits_than_python_converts_fails_its_record_only():
    # Before, int()'s ValueError (past 4,300 digits) escaped the flush, which was then retried for ever.
    digits = b"1" * 5000
    for columns in (None, [{"Name": "a", "Type": "bigint"}]):
        body, errors = conversion.convert([b'{"a": 1}', b'{"a": ' + digits + b"}", b'{"a": "' + digits + b'"}'],
                                          dfcc(), columns=columns)
        assert parquet(body).column("a").to_pylist()[0] in (1, "1")
        messages = [message for _, message in errors]
        assert messages[0] == "Encountered malformed JSON."
        if columns:  # the text of a number: read as one (OpenX), too long for a bigint
            assert messages[1].startswith('Data does not match the schema. For input string: "111')
