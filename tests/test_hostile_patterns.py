"""Patterns a client sends and the server evaluates, against text a client sends too: CloudWatch
Logs filter patterns (`%regex%`, `*` wildcards, space-delimited fields), the `wildcard` rule
of Lambda event filters, and the AllowedPattern (a Java regex) of CloudFormation and SSM
parameters. Each must take time linear in the text, or run where it holds nothing under a limit:
with `re`, `%a*a*...a*b%` over a line of a's and `(a+)+$` over 34 a's and a b backtracked for
minutes and held the interpreter, so every other call of the server waited as long.

The unit tests are the deterministic check (each would run for hours with a backtracking
matcher; `timeout` turns that into a failure); the server test shows what a user saw.
"""
from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from health_probe import HealthProbe
from kinesim.functions.filters import FilterCriteria
from kinesim.logs.patterns import PatternError, compile_pattern
from kinesim.protocol import java_regex

HOSTILE_REGEX = "%" + "a*" * 30 + "b%"
A_LINE = "a" * 10_000


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern, message", [
    (HOSTILE_REGEX, A_LINE),                                   # terms
    ("{ $.x = " + HOSTILE_REGEX + " }", '{"x": "' + A_LINE + '"}'),  # JSON
    ("[x = " + HOSTILE_REGEX + "]", A_LINE),                   # space-delimited
])
def test_regex_terms_match_in_linear_time(pattern, message):
    matches = compile_pattern(pattern)
    assert not matches(message)
    assert matches(message.replace("aaa", "aab", 1))  # the same pattern does match where it should


@pytest.mark.timeout(20)
def test_wildcard_values_match_in_linear_time():
    matches = compile_pattern('{ $.x = "' + "*a" * 30 + '*b" }')
    assert not matches('{"x": "' + A_LINE + '"}')
    assert matches('{"x": "' + A_LINE + 'b"}')


@pytest.mark.timeout(20)
def test_space_delimited_fields_split_in_linear_time():
    # Every `[` without a `]` after it: the field regex scanned to the end from each (quadratic).
    line = "[ " * 200_000
    assert compile_pattern("[a, b]")(line) is False
    assert compile_pattern("[a, ...]")(line) is True


@pytest.mark.timeout(20)
def test_lambda_filter_wildcards_match_in_linear_time():
    criteria = FilterCriteria.parse({"Filters": [{"Pattern": '{"a": [{"wildcard": "' + "*a" * 30 + '*b"}]}'}]})
    assert criteria is not None
    assert not criteria.matches({"a": A_LINE})
    assert criteria.matches({"a": A_LINE + "b"})


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    # Its own server: with a backtracking matcher this test leaves the server stuck for hours.
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.mark.timeout(180)
def test_a_hostile_pattern_holds_neither_its_call_nor_the_server(own_server):
    logs = client_for(own_server.url, "logs", read_timeout=60)
    kinesis = client_for(own_server.url, read_timeout=60)
    group = f"/hostile/{uuid.uuid4().hex[:8]}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    logs.put_log_events(logGroupName=group, logStreamName="s",
                        logEvents=[{"timestamp": int(time.time() * 1000), "message": "a" * 40}])
    answer: dict = {}

    def search() -> None:
        answer["events"] = logs.filter_log_events(logGroupName=group, filterPattern="%" + "a*" * 16 + "b%")["events"]

    searching = threading.Thread(target=search, daemon=True)
    searching.start()
    time.sleep(0.5)  # the search is under way (or, linear, long done)
    started = time.monotonic()
    kinesis.list_streams()
    other_call = time.monotonic() - started
    searching.join(timeout=30)
    assert not searching.is_alive() and answer["events"] == []
    assert other_call < 10, f"ListStreams waited {other_call:.1f} s behind a filter pattern"


# --- AWS's regex subset ("Supported regular expressions (regex) syntax", CloudWatch Logs guide) ----

@pytest.mark.parametrize("pattern, message, expected", [
    # The guide's own examples.
    (r"%\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}%", "from 10.0.1.7 at noon", True),
    ("%[Ee]rror|[Ff]ail%", "the job failed", True),
    ("%^starting|^initializing|^shutting down%", "shutting down now", True),
    ("%^starting|^initializing|^shutting down%", "skipping initializing", False),
    ("%abcc|ab[^c]$%", "xaba", True),
    ("%abcc|ab[^c]$%", "aac", False),
    ("%a{3,5}%", "baab", False),
    ("%colou?r%", "colour", True),
    (r"%\x3A%", "key: value", True),
    (r"%\[.\]%", "[7]", True),
    # "Either m or n can be omitted": `{,n}` is `{0,n}` (RE2 alone reads it as text).
    ("%^xa{,2}y$%", "xy", True),
    ("%^xa{,2}y$%", "xaaay", False),
    # `\d` is `[0-9]` and `\w` `[a-zA-Z_0-9]` (the guide), not Unicode's digits and letters.
    (r"%\d%", "\u0661\u0662", False),
    (r"%^\w+$%", "caf\u00e9", False),
    # `$` is the end or before a final newline, as it was with `re` (function logs end with one).
    ("%done$%", "task done\n", True),
    ("%done$%", "done twice\n", False),
    ("%^.a%", "\ud800a", True),  # a lone surrogate (RE2 reads UTF-8) is one character, no error
    # `*` is the only wildcard in a JSON or delimited value: `?` and `[...]` are themselves.
    ('{ $.v = "1.[0-9]*" }', '{"v": "1.[0-9]-beta"}', True),
    ('{ $.v = "1.[0-9]*" }', '{"v": "1.5-beta"}', False),
    ('{ $.v = "a?*" }', '{"v": "ab"}', False),
    ("{ $.code = 40* }", '{"code": 404}', True),  # a number's text, as before
])
def test_aws_regex_subset_and_wildcards(pattern, message, expected):
    assert compile_pattern(pattern)(message) is expected


@pytest.mark.parametrize("pattern", [
    "%something!%",          # the guide: "would be rejected since '!' is not supported"
    "%(a|b)c%",              # no subpatterns
    "%caf\u00e9%",           # no multi-byte characters
    r"%a\qb%",               # no such escape
    r"%\1%",                 # no back references
    "%a**%",
    "{ $.a = %x% || $.b = %y% || $.c = %z% }",   # at most 2 regex in a filter pattern
    "[a = %x%, b = %y%, c = %z%]",
    "%x% %y% %z%",
    "%" + r"\w{1000}" * 11 + "%",  # past kinesim's bound on the compiled program
    '{ $.a = "x\\qy" }',     # an escape JSON has not: refused, not a server error
])
def test_patterns_aws_refuses(pattern):
    with pytest.raises(PatternError, match="^Invalid filter pattern$"):
        compile_pattern(pattern)


def test_two_regexes_are_allowed():
    matches = compile_pattern("{ $.a = %^x% && $.b = %y$% }")
    assert matches('{"a": "xx", "b": "yy"}') and not matches('{"a": "ax", "b": "yy"}')


# --- Java regular expressions: AllowedPattern of CloudFormation and SSM parameters --------------

BACKTRACKING = "(a+)+$"
NEAR_MISS = "a" * 34 + "b"  # with `re`, 2^34 ways to fail: minutes with the interpreter held


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern, value, expected", [
    (BACKTRACKING, NEAR_MISS, False),
    (BACKTRACKING, "a" * 34, True),
    (r"\d+", "\u0661\u0662", False),                    # Java's \d is ASCII
    (r"[a-z]+", "abc1", False),                          # the whole value, as Pattern.matches
    # What RE2 refuses runs in a child process, under its limits.
    (r"^(?=.*[A-Z])(?=.*\d).{8,}$", "Passw0rdx", True),  # look-ahead, as password parameters use it
    (r"^(?=.*[A-Z])(?=.*\d).{8,}$", "password1", False),
    (r"(\w)\1", "aa", True),                             # a back reference
    (r"\p{Alpha}+", "abc", True),                        # a Java class RE2 lacks
    ("(a|aa)+(?<=b)", "a" * 5000, False),                # backtracks past the child's time limit
    ("((((a{1000}){1000}){1000}){1000})", "aaa", False),  # compiling it alone would exhaust memory
])
def test_java_patterns_match_in_bounded_time(pattern, value, expected):
    assert java_regex.full_matcher(pattern)(value) is expected


@pytest.mark.parametrize("pattern", ["(unclosed", r"a\1", "[z-a]"])
def test_what_is_not_a_pattern_is_told(pattern):
    with pytest.raises(java_regex.InvalidPattern):
        java_regex.check(pattern)


@pytest.mark.timeout(180)
def test_a_backtracking_ssm_allowed_pattern_holds_nothing(own_server):
    ssm = client_for(own_server.url, "ssm", read_timeout=60)
    with HealthProbe(own_server) as probe:
        with pytest.raises(ClientError) as e:
            ssm.put_parameter(Name=f"/hostile/{uuid.uuid4().hex[:8]}", Type="String", Value=NEAR_MISS,
                              AllowedPattern=BACKTRACKING)
    assert e.value.response["Error"]["Code"] == "ParameterPatternMismatchException"
    probe.assert_healthy()


@pytest.mark.timeout(180)
def test_a_backtracking_cloudformation_allowed_pattern_holds_nothing(own_server):
    cfn = client_for(own_server.url, "cloudformation", read_timeout=60)
    template = {"Parameters": {"Name": {"Type": "String", "AllowedPattern": BACKTRACKING}},
                "Resources": {"P": {"Type": "AWS::SSM::Parameter",
                                    "Properties": {"Type": "String", "Value": {"Ref": "Name"}}}}}
    with HealthProbe(own_server) as probe:
        with pytest.raises(ClientError) as e:
            cfn.create_stack(StackName=f"hostile-{uuid.uuid4().hex[:8]}", TemplateBody=json.dumps(template),
                             Parameters=[{"ParameterKey": "Name", "ParameterValue": NEAR_MISS}])
    assert e.value.response["Error"] == {"Type": "Sender", "Code": "ValidationError",
                                         "Message": f"Parameter 'Name' must match pattern {BACKTRACKING}"}
    probe.assert_healthy()


def test_a_pattern_re2_cannot_encode_is_matched_by_the_child():
    # A lone surrogate (a JSON escape can carry one) is no UTF-8: RE2 cannot take it (was a 500).
    assert java_regex.full_matcher("a\ud800?")("a") is True
