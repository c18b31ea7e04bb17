"""The fuzzer's catalogue of hostile input: values by member type and by where they travel (a
JSON or CBOR body, an XML body, a URI label / query parameter / header), garbage bodies, wrong
content types and odd envelopes; text that a service parses further (JSON documents, patterns,
JQ queries, CloudFormation templates and the objects a TemplateURL names, AllowedPattern
expressions, form keys) and the stored data those patterns then run on. Plain data;
tests/fuzzing.py chooses among it."""
from __future__ import annotations

import base64
import dataclasses
import io
import json
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

# CloudFormation templates (TemplateBody, and objects in the bucket a TemplateURL names), the
# AllowedPattern of SSM and CloudFormation parameters with the value matched against it, and ECR's
# lifecycle policies: what costs a template reader, the intrinsic functions' resolver, a deploy or a
# regular expression engine without end.

class Refused(str):
    """A document AWS refuses on the request itself, with a 4xx: its documented limits (500
    resources in a template, 51,200 bytes of TemplateBody, 1 MB at a TemplateURL) and its recorded
    "Template format error"s (YAML aliases are not allowed) by every operation that reads it; its
    "Circular dependency between resources" by those that validate dependencies (`by`). kinesim
    answering one with a 2xx is a failure too (fuzz_wire.is_failure): it goes on to deploy what
    AWS never deploys."""
    by: frozenset[str] | None = None  # the operations that refuse it (None: every one)


def _refused(text: str, by: tuple[str, ...] | None = None) -> Refused:
    out = Refused(text)
    out.by = frozenset(by) if by else None
    return out


# What refuses a template whose resources depend on each other in a circle: CreateStack and UpdateStack
# (ValidationError "Circular dependency between resources: [...]"), ValidateTemplate (the console's
# "ValidateTemplate failed: Template error: resource X has missing or circular dependencies"), not
# CreateChangeSet: its change set is FAILED with that reason (as users' `sam deploy` logs quote it).
_DEPENDENCIES_CHECKED = ("CreateStack", "UpdateStack", "ValidateTemplate")


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()  # beside a document: this member is left out of the request (one template source only)

# The bucket create_resources makes with its default prefix; TEMPLATE_OBJECTS are put there.
TEMPLATE_BUCKET = "fuzz-bucket"
_S3 = f"https://{TEMPLATE_BUCKET}.s3.amazonaws.com/"
_RESOURCE = '{"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": %s}}'


def _json_template(value: str = '"x"', **sections: str) -> str:
    """A template of one SSM parameter whose Value is `value` (JSON text), other sections before it."""
    head = "".join(f'"{name}": {text}, ' for name, text in sections.items())
    return "{" + head + '"Resources": {"R": ' + _RESOURCE % value + "}}"


def _yaml_template(value: str = "x", head: str = "") -> str:
    """The same in YAML (`value` and `head` YAML text)."""
    return f"{head}Resources:\n  R:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n" \
           f"      Value: {value}\n"


def _laughs_yaml(levels: int = 9) -> str:
    """YAML aliases nine deep, nine to a list: 9^9 references in about 700 bytes ("billion laughs")."""
    lines = ["Metadata:", "  l0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"  l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n" + _yaml_template(f'!Join ["", *a{levels - 1}]')


def _nested_stack(url: str) -> str:
    return f"Resources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: {url}\n"


def _resources(count: int) -> str:
    return "{" + ", ".join(f'"R{i}": ' + _RESOURCE % '"x"' for i in range(count)) + "}"


_T_DEPTH, _JOINS = 3000, 1500
_CHAIN = ", ".join(f'"C{i}": {{"Condition": "C{i + 1}"}}' for i in range(_JOINS)) + f', "C{_JOINS}": ' \
                                                                                      '{"Fn::Equals": ["a", "a"]}'
TEMPLATES = [
    Refused(_laughs_yaml()),
    Refused(_yaml_template("x", "Metadata: &a [*a]\n")),                # an alias inside its own anchor
    Refused(_yaml_template("x", "Metadata:\n  a: &a {k: v}\n  b: {<<: [*a, *a, *a]}\n")),  # merge keys
    _json_template(Metadata=_DEEP[0]), _json_template(Metadata=_DEEP[1]),  # JSON 3,000 deep
    _yaml_template("x", "Metadata: " + _DEEP[0] + "\n"),                 # YAML flow, 3,000 deep
    _yaml_template("x", "Metadata: " + "{a: " * _T_DEPTH + "1" + "}" * _T_DEPTH + "\n"),
    _yaml_template("x", "Metadata:\n  " + "- " * _T_DEPTH + "x\n"),      # YAML block sequences, 3,000 deep
    _yaml_template("[" * _T_DEPTH + "]" * _T_DEPTH),                      # ... where the engine resolves values
    _yaml_template("!Join ['', [" * _JOINS + "x" + "]]" * _JOINS),       # !Join nested 1,500 deep
    _json_template('{"Fn::Join": ["", [' * _JOINS + '"x"' + "]]}" * _JOINS),
    _yaml_template("!If [C, " * _JOINS + "x" + ", y]" * _JOINS, "Conditions:\n  C: !Equals [a, a]\n"),
    _yaml_template("!Select [0, [" * _JOINS + "x" + "]]" * _JOINS),
    _yaml_template("x", "Conditions:\n  C: " + "!Not [" * _JOINS + "!Equals [a, a]" + "]" * _JOINS + "\n"),
    # conditions naming each other 1,500 deep, and in a circle
    '{"Conditions": {' + _CHAIN + '}, "Resources": {"R": {"Condition": "C0", ' + _RESOURCE[1:] % '"x"' + "}}",
    '{"Conditions": {"A": {"Condition": "B"}, "B": {"Condition": "A"}}, "Resources": {"R": '
    '{"Condition": "A", ' + _RESOURCE[1:] % '"x"' + "}}",
    # resources referring to each other in a circle, by Ref and by DependsOn (AWS: "Circular dependency")
    _refused('{"Resources": {"A": ' + _RESOURCE % '{"Ref": "B"}' + ', "B": ' + _RESOURCE % '{"Ref": "A"}' + "}}",
             _DEPENDENCIES_CHECKED),
    _refused('{"Resources": {"A": {"DependsOn": "B", ' + _RESOURCE[1:] % '"x"' + ', "B": {"DependsOn": "A", '
             + _RESOURCE[1:] % '"x"' + "}}", _DEPENDENCIES_CHECKED),
    Refused('{"Resources": ' + _resources(501) + "}"),                  # one past the 500 resources allowed
    _yaml_template("!Sub '" + "${AWS::Region}" * 3000 + "'"), _yaml_template("!Sub '" + "${" * 5000 + "'"),
    _yaml_template("!Select [99999999999999999999999, [a]]"), _yaml_template("!Select [-1, [a]]"),
    _yaml_template("!GetAtt R." + "a." * 3000 + "a"), _yaml_template("!Ref " + "R" * 40_000),
    # numbers past what a reader takes, keys no mapping can hold, tags that are unsafe or odd, no mapping
    _yaml_template("1e400"), _yaml_template(".nan"), _yaml_template("9" * 5000), _json_template("NaN"),
    _json_template('"x"', Metadata="9" * 5000), _yaml_template("x", "Metadata: {[1]: 2}\n"),
    _yaml_template("x", "Metadata: {? {a: b}: c}\n"), _yaml_template("!!python/object/apply:os.system [true]"),
    _yaml_template("!!binary '%%%'"), _yaml_template("x", "Metadata: !!set {a, b}\n"),
    "[" * _T_DEPTH + "]" * _T_DEPTH, '{"Resources": ' + _DEEP[1] + "}",
    # AWS::Include of itself, SAM over a deep Globals
    _yaml_template("x", f"Transform: {{Name: AWS::Include, Parameters: {{Location: "
                        f"s3://{TEMPLATE_BUCKET}/templates/include-self.yaml}}}}\n"),
    "Transform: AWS::Serverless-2016-10-31\nGlobals:\n  Function:\n    Environment: " + _DEEP[0] + "\nResources:\n"
    "  F:\n    Type: AWS::Serverless::Function\n    Properties: {Runtime: python3.12, Handler: a.h, InlineCode: x}\n",
    Refused("x" * 51_201),                                              # past TemplateBody's 51,200 bytes
]

# What TemplateURL names: objects create_resources puts in the bucket, and URLs of no template.
TEMPLATE_OBJECTS: dict[str, str | bytes] = {
    "templates/5000-resources.json": '{"Resources": ' + _resources(5000) + "}",
    "templates/laughs.yaml": _laughs_yaml(),
    "templates/include-self.yaml": _yaml_template("x", f"Transform: {{Name: AWS::Include, Parameters: {{Location: "
                                                       f"s3://{TEMPLATE_BUCKET}/templates/include-self.yaml}}}}\n"),
    # block mappings 1,000 deep (one more space a level: half a megabyte)
    "templates/deep-block.yaml": _yaml_template("x", "Metadata:\n" + "".join(" " * i + "a:\n" for i in range(1, 1000))
                                                + " " * 1000 + "b\n"),
    "templates/join-3000.json": _json_template('{"Fn::Join": ["", [' * _T_DEPTH + '"x"' + "]]}" * _T_DEPTH),
    "templates/too-big.json": _json_template('"' + "x" * 1_000_001 + '"'),
    "templates/not-utf8.yaml": b"\xff\xfe" + _yaml_template().encode("utf-16-le"),
    # nested stacks that create themselves, or each other (last: see TEMPLATES)
    "templates/self-nested.yaml": _nested_stack(_S3 + "templates/self-nested.yaml"),
    "templates/ping.yaml": _nested_stack(_S3 + "templates/pong.yaml"),
    "templates/pong.yaml": _nested_stack(_S3 + "templates/ping.yaml"),
}
_REFUSED_OBJECTS = {"templates/5000-resources.json", "templates/laughs.yaml", "templates/too-big.json"}
TEMPLATE_URLS = [
    _S3 + "templates/missing.yaml", f"s3://{TEMPLATE_BUCKET}/templates/self-nested.yaml", "file:///etc/passwd",
    "http://[::1/b/k", "https://", "http://%ff/b/k", _S3 + "%2e%2e/%2e%2e/etc/passwd", _S3 + "templates/%ff%fe",
    "http://169.254.169.254/latest/meta-data/", "https://" + "a" * 5000 + "/k",
    f"https://s3.amazonaws.com/{TEMPLATE_BUCKET}/" + "x/" * 2000,
] + [_refused(_S3 + key) if key in _REFUSED_OBJECTS else _S3 + key for key in TEMPLATE_OBJECTS]

# Java regular expressions (AllowedPattern) that backtrack without end on PATTERN_VICTIM, explode when
# compiled, need a backtracking engine (look-around, back references, possessive quantifiers), or
# are not expressions at all.
PATTERN_VICTIM = "a" * 34 + "b"
JAVA_PATTERNS = ["(a+)+$", "(a|aa)+$", "(a|a)*$", "(.*a){20}$", "(a*)*$", "(?i)(A+)+$", "^(a+)+$",
                 "(?=(a+)+$)a*b", "(a+)+\\1$", "(a++)+$", "((((a{1000}){1000}){1000}){1000})", "a{1000000}",
                 "(" * 300 + "a*" + ")*" * 300, "(?:" * 200 + "a" + ")" * 200, "\\p{Alpha}+", "[", "(", "*a",
                 "a{2,1}", "\\", "(?<n>a)\\k<m>", "[\\x{110000}]", "\ud800", "", "a" * 1025]
PATTERN_TEMPLATES = [_json_template('{"Ref": "P"}', Parameters='{"P": {"Type": "String", "Default": "a", '
                                                                '"AllowedPattern": ' + json.dumps(p) + "}}")
                     for p in JAVA_PATTERNS]
# ... and without a value given, the default is what is matched.
TEMPLATES += [_json_template('{"Ref": "P"}', Parameters='{"P": {"Type": "String", "Default": "' + PATTERN_VICTIM
                                                        + '", "AllowedPattern": ' + json.dumps(p) + "}}")
              for p in ("(a+)+$", "(?=(a+)+$)a*b")]
# ... and last (a stack created from it nests itself until the account's stack quota, which then
# refuses new stacks to what follows), a nested stack that is its own child.
TEMPLATES.append(_nested_stack(_S3 + "templates/self-nested.yaml"))

# ECR lifecycle policies: rules by the hundred, deep selections, tag patterns that backtrack.
_RULE = '{"rulePriority": %s, "selection": %s, "action": {"type": "expire"}}'
_SELECTION = '{"tagStatus": "tagged", "tagPatternList": ["%s"], "countType": "imageCountMoreThan", "countNumber": 1}'
_SINCE = '{"tagStatus": "any", "countType": "sinceImagePushed", "countNumber": %s, "countUnit": "days"}'
LIFECYCLE_POLICIES = POLICIES + _under("rules") + ['{"rules": [' + rules + "]}" for rules in [
    ", ".join(_RULE % (i, _SELECTION % "a*") for i in range(150)), _RULE % ("1e400", _SELECTION % "a*"),
    _RULE % ("1", _DEEP[1]), _RULE % ("1", _SELECTION % _STARS), _RULE % ("1", _SELECTION % ("*" * 3000)),
    _RULE % ("-1", _SINCE % ("9" * 400)), "null, 1, \"x\""]] + ['{"rules": {}}']

# Where the documents above go: members by name (string or blob: records and payloads that
# event source mappings, channels and Firehose parse as JSON; STS's session Policy, SSM's parameter
# policies and documents, CloudFormation's templates and stack policies, ECR's policies) ...
DOCUMENT_MEMBERS: dict[str, list[str]] = {
    "Policy": POLICIES, "policyDocument": POLICIES, "accessPolicy": POLICIES, "deliveryDestinationPolicy": POLICIES,
    "Pattern": EVENT_PATTERNS, "filterPattern": FILTER_PATTERNS, "logEventFilterPattern": FILTER_PATTERNS,
    "Data": DOCUMENTS, "Payload": DOCUMENTS, "InvokeArgs": DOCUMENTS,
    "TemplateBody": TEMPLATES, "ExecutionRoleTemplateBody": TEMPLATES, "StackPolicyBody": POLICIES,
    "StackPolicyDuringUpdateBody": POLICIES, "Policies": POLICIES, "Content": DOCUMENTS,
    "policyText": POLICIES, "repositoryPolicy": POLICIES,
    "lifecyclePolicyText": LIFECYCLE_POLICIES, "lifecyclePolicy": LIFECYCLE_POLICIES,
}
# ... members whose reader needs a neighbour set beside them, by name: (values, {neighbour: value});
# ABSENT leaves a neighbour out (a template is read from one source only) ...
MEMBER_COMPANIONS: dict[str, list[tuple[list[str], dict[str, Any]]]] = {
    # an SSM parameter's pattern, matched against the value put (on a parameter of its own, which may
    # exist: Overwrite)
    "AllowedPattern": [(JAVA_PATTERNS, {"Name": "/fuzz/patterned", "Value": PATTERN_VICTIM, "Type": "String",
                                        "Overwrite": True})],
    # a template's parameter patterns, matched against the value given for it
    "TemplateBody": [(PATTERN_TEMPLATES, {"Parameters": [{"ParameterKey": "P", "ParameterValue": PATTERN_VICTIM}]})],
    "TemplateURL": [(TEMPLATE_URLS, {"TemplateBody": ABSENT})],
}
# ... with, for operations that read one of several sources, the members they then go without
# (GetTemplateSummary summarises a stack it is named instead of the template it is given) ...
DOCUMENT_ALONE: dict[str, tuple[str, ...]] = {"GetTemplateSummary": ("StackName",)}
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
