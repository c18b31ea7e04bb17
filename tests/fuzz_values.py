"""The fuzzer's catalogue of hostile input: values by member type and by where they travel (a
JSON or CBOR body, an XML body, a URI label / query parameter / header), garbage bodies, wrong
content types and odd envelopes; text that a service parses further (JSON documents, patterns,
JQ queries, form keys) and the stored data those patterns then run on. Plain data;
tests/fuzzing.py chooses among it."""
from __future__ import annotations

import base64
import dataclasses
import io
import warnings
import zipfile
from typing import Any

import cbor2

CBOR_TYPE = "application/x-amz-cbor-1.1"


@dataclasses.dataclass(frozen=True)
class Raw:
    """Text (JSON, XML, a URI or query part) or bytes (CBOR) placed in a request exactly as given:
    what an encoder will not write, such as NaN in JSON, 5,000 levels of nesting or `%ff`."""
    value: str | bytes


DEEP = 5000
LONG = "x" * 100_000
HUGE_INT = 10 ** 5000  # past Python's 4,300-digit int-to-text limit; a 2,077-byte CBOR bignum
_J_DEEP = [Raw("[" * DEEP + "]" * DEEP), Raw('{"a":' * DEEP + "1" + "}" * DEEP)]
_J_NUMBERS = [Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e400"), Raw("-0"), Raw("9" * 5000)]
_C_DEEP = [Raw(b"\x81" * DEEP + b"\x00"), Raw(b"\xa1\x61a" * DEEP + b"\x00"), Raw(b"\x9f" * DEEP + b"\xff" * DEEP),
           Raw(b"\xc6" * DEEP + b"\x00")]

# Body values in JSON (JSON 1.1, REST-JSON): whatever the member's type, and by type.
JSON_ANY = [None, True, 0, -1, 1.5, 2 ** 64, -(2 ** 64), "", "ΩΩΩΩ", "\ud800", LONG, [], [None], {}, {"": None},
            *_J_NUMBERS, *_J_DEEP]
JSON_BY_TYPE: dict[str, list[Any]] = {
    "string": ["", " ", "ΩΩΩΩ", "\ud800", "\x00\x01", LONG, "../../../../etc/passwd", "a b*?", "NOT_A_VALUE", 12,
               True, [], {"a": 1}],
    "integer": ["12", "", 1.5, -1, 0, 2 ** 31, 2 ** 63, 2 ** 64, -(2 ** 64), *_J_NUMBERS, True, []],
    "float": ["1.5", *_J_NUMBERS, 2 ** 64, -1, "", True],
    "boolean": ["true", 1, 0, None, "", [], {}],
    # "ΩΩΩΩ": not base64, but four characters, as a decoder that only counts them would accept.
    "blob": ["ΩΩΩΩ", "!!!!", "YQ", "Y", "====", "YQ==YQ==", "a b", "", 12, [], {}, "A" * 1_400_000],
    "timestamp": ["2020-13-45T99:99:99Z", "yesterday", "", -1, 2 ** 64, -(2 ** 64), 1e20, *_J_NUMBERS, True, []],
    "list": ["x", 1, {}, [None], [[[]]], *_J_DEEP],
    "map": [[], "x", 1, {"": None}, {"k" * 4096: "v"}, {f"k{i}": "v" for i in range(5000)}, *_J_DEEP],
    "structure": [[], "x", 1, None, {"NoSuchMember": 1}, *_J_DEEP],
}
# The same in CBOR (Kinesis's other protocol): tags, bignums, undefined, bytes for text and back.
CBOR_ANY = [None, cbor2.undefined, True, -1, 1.5, float("nan"), float("inf"), 2 ** 64, -(2 ** 64) - 1, HUGE_INT, "",
            "ΩΩΩΩ", b"\xff\x00", [], {}, cbor2.CBORTag(1, "x"), cbor2.CBORTag(1, 10 ** 30), cbor2.CBORTag(99, 1),
            cbor2.CBORTag(4, [-2, 27315]), cbor2.CBORSimpleValue(99), *_C_DEEP]
CBOR_BY_TYPE: dict[str, list[Any]] = {
    "string": [b"bytes", "", "ΩΩΩΩ", LONG, 12, cbor2.CBORTag(2, b"\x01" * 9)],
    "integer": ["12", 2 ** 63, 2 ** 64, -(2 ** 64) - 1, HUGE_INT, float("nan"), float("-inf"), 1.5, b"\x01"],
    "float": ["1.5", float("nan"), float("inf"), 2 ** 64, HUGE_INT],
    "boolean": ["true", 1, cbor2.undefined],
    "blob": ["ΩΩΩΩ", "text", "!!!!", 12, [], b"x" * 1_100_000],
    "timestamp": [cbor2.CBORTag(1, "x"), cbor2.CBORTag(1, HUGE_INT), cbor2.CBORTag(1, float("nan")),
                  cbor2.CBORTag(0, "2020-13-45T99:99:99Z"), float("inf"), 2 ** 64, HUGE_INT, "yesterday"],
    "list": ["x", {}, [None], *_C_DEEP],
    "map": [[], "x", {b"k": 1}, {1: 2}, *_C_DEEP],
    "structure": [[], "x", {"NoSuchMember": 1}, *_C_DEEP],
}
for _table in (JSON_BY_TYPE, CBOR_BY_TYPE):
    _table["long"], _table["double"] = _table["integer"], _table["float"]
SCALARS = frozenset({"integer", "long", "float", "double", "boolean", "blob", "timestamp"})

# In a URI label, a query parameter or a header everything is text; Raw goes in unencoded.
TEXT = ["", " ", "..", "../../../../etc", "%", Raw("%ff%fe"), Raw("%00"), Raw("%2e%2e"), Raw("%2F"), Raw("%zz"),
        "ΩΩΩΩ", "x" * 8000, "-1", "0", "1.5", "99999999999999999999999", "NaN", "1e400", "true", "maybe", "null",
        "2020-13-45T99:99:99Z", "a,b,,c", "*", "\t"]
XML_TEXT = [*TEXT, Raw("<x>"), Raw("&undefined;"), Raw("]]>"), Raw("&#0;")]
# ... and by the member's type, the boundaries and near misses worth sending every time.
_TEXT_NUMBERS = ["0", "-1", "2147483648", "99999999999999999999999", "1.5", "abc", "", "1e400", "NaN", Raw("%ff")]
TEXT_BY_TYPE: dict[str, list[Any]] = {
    "integer": _TEXT_NUMBERS, "long": _TEXT_NUMBERS, "float": _TEXT_NUMBERS, "double": _TEXT_NUMBERS,
    "boolean": ["maybe", "", "TRUE", "1"],
    "timestamp": ["garbage", "2020-13-45T99:99:99Z", "-1", "99999999999999999999", "", "Thu, 99 Foo 2026 99:99:99 GMT"],
}


def _zip(*entries: tuple[str, bytes, int]) -> bytes:
    """A package with these (name, content, unix mode) entries, as given (zipfile adds no checks)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": meant
        for name, content, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            z.writestr(info, content)
    return buf.getvalue()


_FILE, _LINK = 0o100644, 0o120777
_CODE = b"def handler(event, context):\n    return event\n"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


_TOKENS = ["garbage", _b64(b"{"), _b64(b'{"a":1}'), _b64(b"\xff\xfe"), _b64(b"consumers|x|nan|y"),
           base64.urlsafe_b64encode(b"x" * 3000).decode(), "AAAAAAAAAAE" + "A" * 100]
_NUMBER_TEXT = ["-1", "0", "9" * 200, "٣٣", "1e5", " 1", "0x10", "340282366920938463463374607431768211456"]
_PATTERNS = ['{"data": {"a": [{"numeric": [">", "x"]}]}}', '{"data": {"a": [{"numeric": [">", 1, ">", 2]}]}}',
             '{"data": {"a": [{"prefix": 1}]}}', '{"data": {"a": [{"anything-but": {"prefix": []}}]}}',
             '{"data": {"a": [{"cidr": "10.0.0.0/99"}]}}', '{"data": {"a": [{"wildcard": "' + "*" * 500 + '"}]}}',
             '{"$or": []}', '{"$or": [{"a": [1]}, 5]}', '{"a": []}', '{"a": [{}]}', '{"a": [{"exists": "yes"}]}',
             '{"a": {"b": ' * 2000 + "[1]" + "}" * 2000 + "}", '{"a": [1e400]}', '[]', '"x"', "{", ""]
# Members with a meaning of their own: packages crafted against the extraction, handlers,
# paging tokens, numbers written as text, filter patterns, client contexts.
BY_MEMBER: dict[str, list[Any]] = {
    "Handler": ["../../../etc/passwd.handler", "app", ".handler", "app.", "a" * 200 + ".h", "app.handler.extra",
                "os.system", "app.__init__"],
    "NextToken": _TOKENS, "Marker": _TOKENS, "ContinuationToken": _TOKENS, "KeyMarker": _TOKENS,
    "UploadIdMarker": _TOKENS, "ShardIterator": _TOKENS, "ExclusiveStartShardId": _TOKENS,
    "ExplicitHashKey": _NUMBER_TEXT, "StartingSequenceNumber": _NUMBER_TEXT,
    "SequenceNumberForOrdering": _NUMBER_TEXT,
    "ShardId": ["shardId-", "shardId--1", "shardId-" + "9" * 40, "shardId-٣", "shardId-000000000000" + "0" * 1000],
    "Pattern": _PATTERNS,
    "ClientContext": ["ΩΩΩΩ", _b64(b"[]"), _b64(b"{" * 5000),
                      _b64(b'{"custom": ' + b"[" * 3000 + b"]" * 3000 + b"}")],
    "ZipFile": [_zip(), _zip(("a" * 300 + ".py", _CODE, _FILE)), _zip(("../escape.py", _CODE, _FILE)),
                _zip(("/tmp/kinesim-fuzz-escape.py", _CODE, _FILE)),
                _zip(("app.py", _CODE, _FILE), ("app.py", b"x", _FILE)),
                _zip(("app.py", _CODE, _FILE), ("app.py/inner.py", _CODE, _FILE)),
                _zip(("link", b"../../../../../../../etc/passwd", _LINK)), _zip(("..\\..\\escape.py", _CODE, _FILE)),
                _zip(*((f"d{i}/f{i}.py", b"", _FILE) for i in range(2000)))],
}


def _laughs(levels: int) -> bytes:
    """Nested entities that expand tenfold per level ("billion laughs")."""
    entities = '<!ENTITY l0 "lol">' + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, levels))
    return f'<?xml version="1.0"?><!DOCTYPE d [{entities}]><Delete>&l{levels - 1};</Delete>'.encode()


GARBAGE_ANY = [b"", b"\x00" * 1000, b"\xff\xfe\xfd", "ΩΩΩΩ".encode(), b"\xef\xbb\xbf{}"]
GARBAGE = {
    "json": [b"[]", b"null", b"1", b'"s"', b"true", b"{", b'{"a":}', b"[" * 100_000, b'{"a":' * 100_000,
             b'{"a":1,"a":[' + b"1," * 100_000 + b"1]}", b'{"x":"\\ud800"}', b'{"x":NaN}', "{}".encode("utf-16")],
    "cbor": [b"\xff", b"\xbf", b"\xa1", b"\x80", b"\x9f" * 100_000, b"\x81" * 100_000, b"\xd9\xd9\xf7\xa0",
             b"\xfb\x00", b"\x5b\x00\x00\x00\x10\x00\x00\x00\x00", b"\xc2\x5a\x00\x00\x13\x88" + b"\x01" * 5000,
             b"\xa1\x63abc\xc1\x78\x01x"],
    "xml": [b"<", b"not xml", b"<?xml version='1.0'?><Delete>", b"<a>" * 50_000 + b"</a>" * 50_000,
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><Delete>&e;</Delete>',
            _laughs(7), "<Delete>Ω</Delete>".encode("utf-16"), b"<Delete><Object><Key>\x00</Key></Object></Delete>",
            b"<Delete xmlns:a='x'><a:Object/><Quiet>maybe</Quiet></Delete>"],
}
WRONG_TYPES = {  # None: no Content-Type header at all
    "json": ["text/plain", None, "application/xml", "application/x-amz-json-1.0", "application/x-www-form-urlencoded",
             "multipart/form-data; boundary=x", CBOR_TYPE, "application/x-amz-json-1.1; charset=utf-16"],
    "rest-json": ["text/plain", None, "application/xml", "application/x-amz-json-1.1",
                  "multipart/form-data; boundary=x", "application/json; charset=latin-1"],
    "rest-xml": ["text/plain", None, "application/json", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x", "application/xml; charset=utf-16"],
}
# Odd envelopes: (method or None to keep it, query string added, headers set or, None, removed).
_ANY_ODD = [(None, "", {"Origin": "http://evil.example"}), (None, "", {"Origin": "null"}),
            (None, "", {"Origin": "http://localhost.evil.example"}), (None, "", {"Authorization": None}),
            (None, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%ff&X-Amz-Signature=", {"Authorization": None}),
            (None, "X-Amz-Algorithm=x", {}), (None, "", {"Authorization": "garbage"}),
            (None, "", {"Authorization": "AWS4-HMAC-SHA256 Credential=////, Signature="}),
            (None, "", {"X-Amz-Date": None}), (None, "", {"Transfer-Encoding": "chunked, identity"})]
ODD = {
    "s3": [(None, q, h) for q, h in [
        ("uploads", {}), ("uploadId=", {}), ("uploadId=x&partNumber=abc", {}), ("partNumber=0&uploadId=x", {}),
        ("partNumber=10001&uploadId=x", {}), ("partNumber=1", {}), ("partNumber=1", {"x-amz-copy-source": "b/k"}),
        ("max-keys=-1", {}), ("max-keys=abc", {}), ("max-keys=99999999999999999999", {}),
        ("list-type=2&continuation-token=%25%25", {}), ("list-type=3", {}), ("prefix=../../&delimiter=", {}),
        ("encoding-type=bogus", {}), ("marker=%ff", {}), ("versionId=x", {}), ("delete", {}), ("location", {}),
        ("uploads&uploadId=x", {}), ("", {"Range": "bytes=abc"}), ("", {"Range": "bytes=5-1"}),
        ("", {"Range": "bytes=99999999999999999999-"}), ("", {"Range": "bytes=-0"}),
        ("", {"If-Modified-Since": "garbage"}), ("", {"If-Match": ""}), ("", {"x-amz-copy-source": "%ff"}),
        ("", {"x-amz-copy-source": "/../../etc/passwd"}), ("", {"x-amz-copy-source": "b/k?versionId=x"}),
        ("", {"Content-MD5": "bad"}), ("", {"x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"}),
        ("", {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": "abc"}),
        ("", {"x-amz-meta-Ω": "Ω"}), ("", {"x-amz-checksum-crc32": "!!"}), ("", {"x-amz-tagging": "a=b&&=&"})]]
    + [("PATCH", "", {}), ("OPTIONS", "", {"Access-Control-Request-Method": "PUT"})] + _ANY_ODD,
    "lambda": [(None, q, h) for q, h in [
        ("Qualifier=%00", {}), ("Marker=garbage", {}), ("MaxItems=-1", {}), ("MaxItems=abc", {}),
        ("FunctionVersion=ALL&MasterRegion=xx", {}), ("", {"X-Amz-Invocation-Type": "Garbage"}),
        ("", {"X-Amz-Client-Context": "ΩΩΩΩ"}), ("", {"X-Amz-Log-Type": "Tail"}), ("find=Other", {})]]
    + [("PATCH", "", {}), ("TRACE", "", {})] + _ANY_ODD,
    "json": [("GET", "", {}), ("PUT", "", {}), ("DELETE", "a=%ff", {}), (None, "", {"X-Amz-Target": ""}),
             (None, "", {"X-Amz-Target": "."}), (None, "", {"X-Amz-Target": "x" * 10000}),
             (None, "", {"X-Amz-Target": "Kinesis_20131202.ListStreams"}),
             (None, "", {"X-Amz-Target": "Firehose_20150804.ListDeliveryStreams"})] + _ANY_ODD,
}



# ---------------------------------------------------------------------------------------------
# Text a service parses on its own: JSON documents in string members (policies, filter policies,
# event patterns, a message with MessageStructure json), filter patterns, JQ queries. They pass the
# model's checks (a string is a string) and reach the service's parser, which must refuse them as
# AWS does: not recurse 3,000 levels, not backtrack for ever, not run a query without end.

DOC_DEPTH = 3000


def deep_documents(depth: int = DOC_DEPTH, limit: int | None = None) -> list[str]:
    """An array and an object nested `depth` levels (past json's recursion limit, 1,000, and
    orjson's, 1,024), or as deep as fits in `limit` characters (a member's maximum length)."""
    arrays, objects = (depth, depth) if limit is None else (min(depth, limit // 2), min(depth, (limit - 1) // 6))
    return ["[" * arrays + "]" * arrays, '{"a":' * objects + "1" + "}" * objects]


_DEEP = deep_documents()


def _under(*keys: str) -> list[str]:
    """The deep array and object under keys that a reader of the document looks up."""
    return [f'{{"{key}": {_DEEP[i % 2]}}}' for i, key in enumerate(keys)]


_MALFORMED = ["", "{", "[", '{"a":}', "[1,]", '{"a": 1} x', "{'a': 1}", '{"a": NaN}', '{"a": 1e400}',
              '{"a": ' + "9" * 5000 + "}", '{"\ud800": 1}', '{"a": "\\ud800"}', "\x00", "null", "[]", '"x"', "{}",
              '{"a": 1, "a": 2}', "\ufeff{}", "{" * 100 + "}" * 99]
_HUGE = ['{"a": [' + "1," * 100_000 + "1]}",                       # an array of 100,000 numbers
         "[" + "{}," * 100_000 + "{}]",                              # 100,000 objects
         "{" + ",".join(f'"k{i}": {i}' for i in range(20_000)) + "}",  # 20,000 keys
         '{"a": "' + "x" * 300_000 + '"}']                           # one 300 KB string
DOCUMENTS = [*_DEEP, *_HUGE, *_MALFORMED]
POLICIES = DOCUMENTS + _under("Statement", "Version")

# Event patterns (Lambda FilterCriteria, SNS FilterPolicy): what costs a matcher time or memory.
_STARS = "*a*a*a*a*a*a*a*a*a*b"   # a wildcard that backtracks on "aaaa…" (the victims below)
EVENT_PATTERNS = DOCUMENTS + _under("data", "body", "a") + _PATTERNS + [
    *(f'{{"{key}": {{"a": [{{"wildcard": "{_STARS}"}}]}}}}' for key in ("data", "body")),
    f'{{"a": [{{"wildcard": "{_STARS}"}}]}}', '{"a": [{"wildcard": "' + "*" * 3000 + 'b"}]}',
    '{"a": [{"prefix": "' + "a" * 100_000 + '"}]}', '{"a": [{"anything-but": [' + "1," * 100_000 + "1]}]}",
    '{"a": [' + ",".join(f'"v{i}"' for i in range(100_000)) + "]}",
    # 100^10 combinations of values: a matcher (or a limit check) that expands them does not end.
    "{" + ",".join(f'"k{i}": [' + ",".join(map(str, range(100))) + "]" for i in range(10)) + "}",
    '{"$or": [' * 1000 + '{"a": [1]}' + "]}" * 1000, '{"$or": [' + ",".join(['{"a": [1]}'] * 10_000) + "]}",
    '{"a": [{"numeric": [">", 0, "<", ' + "9" * 400 + "]}]}", '{"a": [{"numeric": ["=", 1e400]}]}',
    '{"a": [{"cidr": "' + "1." * 5000 + '0/8"}]}', '{"a": [{"equals-ignore-case": ' + _DEEP[0] + "}]}"]

# CloudWatch Logs filter patterns (at most 1,024 characters: longer ones are the model's to refuse).
FILTER_PATTERNS = [
    "%a*a*a*a*a*a*a*a*a*b%", "%(a+)+b%", "%(a|aa)*b%", "%(.*a){20}b%", "%" + "a?" * 30 + "a" * 30 + "%",
    "%(a*)*b%", "%\\%", "%[%", "%(%", "%" + "(" * 500 + "a" + ")" * 500 + "%", "%a{1000000}%", "%%", "%",
    f'{{ $.a = "{_STARS}" }}', "{ $.a = %a*a*a*a*a*a*a*a*a*b% }", f'[w1 = "{_STARS}", w2]', f"[w1 = {_STARS}]",
    f'"{_STARS}"', _STARS, "?" + " ?".join(["*a*a*b"] * 100),
    "{ " + "(" * 500 + "$.a = 1" + ")" * 500 + " }", "{ " + " || ".join(["$.a = 1"] * 90) + " }",
    "{ $." + ".".join(["a"] * 500) + " = 1 }", "{ $" + "[*]" * 300 + " = 1 }", "{ $.*.*.*.*.*.*.*.* = 1 }",
    "[" + ",".join(f"w{i}" for i in range(200)) + "]", "[" * 500 + "]" * 500, "{" * 1000, "x" * 1025,
    "{", "[", '"', "{ $.a = }", '{ $.a = "\ud800" }', "{ $.a = 1e400 }", "{ $.a = " + "9" * 1000 + " }",
    "{ $.a IS }", "{ $.a NOT EXISTS || }", "[w1=*, w2!=*]", "-a -b -c -" + "-".join("abcdef" * 80)]

# MetadataExtractionQuery (Firehose dynamic partitioning, JQ 1.6; key `a`, as DOCUMENT_CONTEXT's
# Prefix names): queries without end, in time or memory (jq holds the GIL while it runs).
JQ_QUERIES = [
    "{a: (last(range(1e12)))}", "{a: ([repeat(1)] | length)}", "{a: (def f: f; f)}", "{a: (def f: [f]; f)}",
    "{a: ([range(1e8)] | length)}", '{a: ("x" * 1e9)}', '{a: (.a | test("(a*)*b"))}', "{a: (.. | numbers)}",
    "{a: [limit(1e9; repeat(.))] | length}", "{a: (reduce range(1e12) as $i (0; . + $i))}",
    "{a: " + "[" * 3000 + "1" + "]" * 3000 + "}", "{a: " + "(" * 3000 + ".a" + ")" * 3000 + "}",
    "{a: .a" + " | ." * 10_000 + "}", '{a: (getpath(["a"] * 100000))}', "{a: input}", "{a: $__loc__.file}",
    "{a: env.PATH}", '{a: (now | strftime("%Y" * 10000))}',
    "{a: .a, " + ", ".join(f"k{i}: 1" for i in range(5000)) + "}",
    "{", "", "{a:}", "{a: .a", "{(.a): 1}", "{a: (.a as [$x] | $x)}", '{a: ("\\(' * 100 + "1" + ')"' * 100 + ")}"]

# The stored data the patterns above run on: log events, Kinesis and Firehose records, SNS messages.
# Long runs of "a" without the "b" a backtracking pattern wants, and JSON nested 900 levels (under
# the parsers' limits, over what a recursive matcher's stack allows once it is called deep).
VICTIMS = ["a" * 60, '{"a": "' + "a" * 60 + '", "b": "10.0.0.1", "n": 5}', " ".join(["a" * 30] * 20),
           '{"a": ' + "[" * 900 + '"' + "a" * 60 + '"' + "]" * 900 + "}",
           '{"a": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}"]

# Where the documents above go: members by name (string or blob: records and payloads that
# event source mappings, channels and Firehose parse as JSON) ...
DOCUMENT_MEMBERS: dict[str, list[str]] = {
    "Policy": POLICIES, "policyDocument": POLICIES, "accessPolicy": POLICIES, "deliveryDestinationPolicy": POLICIES,
    "Pattern": EVENT_PATTERNS, "filterPattern": FILTER_PATTERNS, "logEventFilterPattern": FILTER_PATTERNS,
    "Data": DOCUMENTS, "Payload": DOCUMENTS, "InvokeArgs": DOCUMENTS,
}
# ... entries of SQS queue and SNS topic and subscription attribute maps, by key (with a FilterPolicy
# also on the message body: its scope set beside it) ...
DOCUMENT_ATTRIBUTES: dict[str, list[str]] = {
    "Policy": POLICIES, "DataProtectionPolicy": POLICIES, "FilterPolicy": EVENT_PATTERNS,
    "RedrivePolicy": DOCUMENTS + _under("deadLetterTargetArn", "maxReceiveCount"),
    "RedriveAllowPolicy": DOCUMENTS + _under("redrivePermission", "sourceQueueArns"),
    "DeliveryPolicy": DOCUMENTS + _under("http", "healthyRetryPolicy"),
    "ArchivePolicy": DOCUMENTS + _under("MessageRetentionPeriod"), "ReplayPolicy": DOCUMENTS,
}
ATTRIBUTE_COMPANIONS: dict[str, list[dict[str, str]]] = {"FilterPolicy": [{}, {"FilterPolicyScope": "MessageBody"}]}
# ... and members whose neighbour says what they hold, by the structure holding both:
# {structure shape: (selector member, {its value: values}, member)}.
_ATTRIBUTE_VALUE = ("AttributeName", DOCUMENT_ATTRIBUTES, "AttributeValue")
_JSON_MESSAGE = ("MessageStructure", {"json": DOCUMENTS + _under("default", "sqs", "firehose")}, "Message")
DOCUMENT_PAIRS: dict[str, tuple[str, dict[str, list[str]], str]] = {
    "SetTopicAttributesInput": _ATTRIBUTE_VALUE, "SetSubscriptionAttributesInput": _ATTRIBUTE_VALUE,
    "PublishInput": _JSON_MESSAGE, "PublishBatchRequestEntry": _JSON_MESSAGE,
    "ProcessorParameter": ("ParameterName", {"MetadataExtractionQuery": JQ_QUERIES}, "ParameterValue"),
}
# Names filled in around a document, so that it reaches its parser: a Firehose destination with
# dynamic partitioning on key `a` (its MetadataExtractionQuery is what JQ_QUERIES replace).
DOCUMENT_CONTEXT: dict[str, list[Any]] = {
    "Prefix": ["!{partitionKeyFromQuery:a}/"], "ErrorOutputPrefix": ["errors/"],
    "DynamicPartitioningConfiguration": [{"Enabled": True}],
    "ProcessingConfiguration": [{"Enabled": True, "Processors": [{"Type": "MetadataExtraction", "Parameters": [
        {"ParameterName": "MetadataExtractionQuery", "ParameterValue": "{a: .a}"},
        {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]}]}],
    "BufferingHints": [{"SizeInMBs": 64, "IntervalInSeconds": 0}],
}

# SNS's query protocol: form keys a parser splits on dots, added to a valid request.
_DOTS = 5000
FORM_KEYS = [
    "." * _DOTS + "=1", "a." * _DOTS + "b=1", "Attributes" + ".entry" * _DOTS + ".1.key=Policy",
    "Attributes.entry.1" + "." * _DOTS + "key=Policy", "MessageAttributes.entry.1.Value" + ".x" * _DOTS + "=1",
    "Tags.member." + "1." * _DOTS + "Key=k", "Attributes.entry." + "9" * _DOTS + ".key=k",
    "." * 100_000 + "=1",
    # many keys, each with many dots: what a parser that rescans the form per key makes quadratic
    "&".join(f"Attributes.entry.{i}.key" + "." * 500 + f"=k{i}" for i in range(1, 401)),
    "&".join(f"Attributes.entry.{i}.key=k{i}&Attributes.entry.{i}.value=v" for i in range(1, 10_001)),
    "&".join(f"MessageAttributes.entry.{i}.Name=n{i}" for i in range(1, 20_001)),
]
