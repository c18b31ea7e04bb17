"""firehose.keys: S3 object keys as Firehose names them, and AWS's prefix validation."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from firehose.keys import (
    PatternError,
    PrefixEvaluationError,
    error_prefix_template,
    evaluate_prefix,
    expressions,
    format_timestamp,
    object_key,
    validate_prefixes,
)
from kinesim.protocol.errors import AwsError

WHEN = datetime(2018, 8, 27, 10, 30, 5, 123456, tzinfo=timezone.utc)  # a Monday
UUID = "a9fa96af-e4e4-409f-bac3-1f804714faaa"
SUFFIX = f"s-1-2018-08-27-10-30-05-{UUID}"


def fixed_random():
    return UUID


def counter_random():
    """A new UUID-like string per call, to tell occurrences apart."""
    state = {"n": 0}

    def random():
        state["n"] += 1
        return f"{state['n']:08x}-0000-0000-0000-000000000000"

    return random


# ------------------------------------------------------------------- object keys


def test_default_key_is_utc_hour_prefix_then_name_version_time_uuid():
    assert object_key(None, "s", 1, WHEN, random=fixed_random) == f"2018/08/27/10/{SUFFIX}"
    assert object_key("", "s", 1, WHEN, random=fixed_random) == f"2018/08/27/10/{SUFFIX}"


def test_naive_datetime_is_utc_and_version_and_extension_are_in_the_name():
    key = object_key(None, "clicks", 7, datetime(2024, 1, 2, 3, 4, 5), extension=".gz", random=fixed_random)
    assert key == f"2024/01/02/03/clicks-7-2024-01-02-03-04-05-{UUID}.gz"


def test_default_random_part_is_a_uuid():
    key = object_key(None, "s", 1, WHEN)
    uuid_part = key.removeprefix("2018/08/27/10/s-1-2018-08-27-10-30-05-")
    assert len(uuid_part) == 36 and uuid_part.count("-") == 4


def test_static_prefix_gets_the_time_prefix_without_a_slash_added():
    assert object_key("logs/", "s", 1, WHEN, random=fixed_random) == f"logs/2018/08/27/10/{SUFFIX}"
    assert object_key("logs", "s", 1, WHEN, random=fixed_random) == f"logs2018/08/27/10/{SUFFIX}"


def test_expression_prefix_is_evaluated_without_anything_appended():
    prefix = "myPrefix/year=!{timestamp:yyyy}/month=!{timestamp:MM}/day=!{timestamp:dd}/hour=!{timestamp:HH}/"
    when = datetime(2018, 7, 6, 23, 0, tzinfo=timezone.utc)
    assert evaluate_prefix(prefix, when) == "myPrefix/year=2018/month=07/day=06/hour=23/"
    # AWS adds no "/" after an expression prefix either.
    assert object_key("data/!{timestamp:yyyy}", "s", 1, WHEN, random=fixed_random) == f"data/2018{SUFFIX}"


def test_aws_documented_examples():
    # "Understand custom prefixes for Amazon S3 objects", example table.
    prefix = "myFirehose/DeliveredYear=!{timestamp:yyyy}/anyMonth/rand=!{firehose:random-string}"
    assert evaluate_prefix(prefix, WHEN, random=lambda: "5abf82daaa5-rest-of-uuid") == (
        "myFirehose/DeliveredYear=2018/anyMonth/rand=5abf82daaa5"
    )
    error_prefix = "myFirehoseFailures/!{firehose:error-output-type}/!{timestamp:yyyy}/anyMonth/!{timestamp:dd}"
    assert evaluate_prefix(error_prefix, datetime(2018, 8, 10, tzinfo=timezone.utc),
                           error_output_type="processing-failed") == "myFirehoseFailures/processing-failed/2018/anyMonth/10"
    quoted = "myErrorPrefix/!{timestamp:'year='yyyy'/month='MM'/day='dd'/hour='HH}/!{firehose:error-output-type}"
    assert evaluate_prefix(quoted, datetime(2018, 7, 6, 23, 0, tzinfo=timezone.utc),
                           error_output_type="processing-failed") == (
        "myErrorPrefix/year=2018/month=07/day=06/hour=23/processing-failed"
    )


def test_random_string_is_eleven_chars_and_new_per_occurrence():
    prefix = "!{firehose:random-string}/x/!{firehose:random-string}/"
    evaluated = evaluate_prefix(prefix, WHEN, random=counter_random())
    assert evaluated == "00000001-00/x/00000002-00/"


def test_suffix_uses_its_own_random_value():
    key = object_key("r=!{firehose:random-string}/", "s", 1, WHEN, random=counter_random())
    assert key == "r=00000001-00/s-1-2018-08-27-10-30-05-00000002-0000-0000-0000-000000000000"


def test_error_output_default_is_prefix_then_type_then_time():
    template = error_prefix_template(None, None)
    assert template == ""
    assert object_key(template, "s", 1, WHEN, error_output_type="format-conversion-failed", random=fixed_random) == (
        f"format-conversion-failed/2018/08/27/10/{SUFFIX}"
    )
    # Unset ErrorOutputPrefix: the (static) Prefix is used.
    template = error_prefix_template("myFirehosePrefix/", None)
    assert object_key(template, "s", 1, WHEN, error_output_type="processing-failed", random=fixed_random) == (
        f"myFirehosePrefix/processing-failed/2018/08/27/10/{SUFFIX}"
    )
    # A static ErrorOutputPrefix gets the same treatment.
    template = error_prefix_template("data/", "errors/")
    assert object_key(template, "s", 1, WHEN, error_output_type="processing-failed", random=fixed_random) == (
        f"errors/processing-failed/2018/08/27/10/{SUFFIX}"
    )


def test_error_output_type_needs_a_value():
    with pytest.raises(PrefixEvaluationError):
        evaluate_prefix("e/!{firehose:error-output-type}/", WHEN)


def test_partition_keys_from_query_and_lambda():
    prefix = "customer_id=!{partitionKeyFromQuery:customer_id}/device=!{partitionKeyFromLambda:device}/"
    keys = {"query": {"customer_id": "1234567890"}, "lambda": {"device": "mobile"}}
    assert object_key(prefix, "s", 1, WHEN, partition_keys=keys, random=fixed_random) == (
        f"customer_id=1234567890/device=mobile/{SUFFIX}"
    )
    flat = {"customer_id": "1", "device": "tv"}
    assert evaluate_prefix(prefix, WHEN, partition_keys=flat) == "customer_id=1/device=tv/"


def test_missing_partition_key_cannot_be_evaluated():
    with pytest.raises(PrefixEvaluationError, match="customer_id"):
        evaluate_prefix("c=!{partitionKeyFromQuery:customer_id}/", WHEN, partition_keys={"query": {}})


def test_custom_time_zone_applies_to_prefix_and_suffix():
    tokyo = WHEN.astimezone(ZoneInfo("Asia/Tokyo"))
    assert object_key(None, "s", 1, tokyo, random=fixed_random) == f"2018/08/27/19/s-1-2018-08-27-19-30-05-{UUID}"


def test_expressions_lists_namespace_and_value():
    assert expressions("a/!{timestamp:yyyy}/!{partitionKeyFromQuery:id}/") == [
        ("timestamp", "yyyy"),
        ("partitionKeyFromQuery", "id"),
    ]
    assert expressions(None) == []


# ----------------------------------------------------------- Java DateTimeFormatter


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("yyyy/MM/dd/HH/", "2018/08/27/10/"),
        ("yy-M-d H:m:s", "18-8-27 10:30:5"),
        ("uuuu yyyyy", "2018 02018"),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2018-08-27T10:30:05.123Z"),
        ("SSSSSS SSSSSSSSS S", "123456 123456000 1"),
        ("'year='yyyy", "year=2018"),
        ("'it''s' ''", "it's '"),
        ("MMM MMMM MMMMM LLL", "Aug August A Aug"),
        ("E EEE EEEE EEEEE", "Mon Mon Monday M"),
        ("e ee c eee", "2 02 2 Mon"),
        ("D DDD Q QQ QQQ QQQQ q", "239 239 3 03 Q3 3rd quarter 3"),
        ("h hh K k a", "10 10 10 10 AM"),
        ("w ww W F", "35 35 5 4"),
        ("YYYY G GGGG", "2018 AD Anno Domini"),
        ("A n N g", "37805123 123456000 37805123456000 58357"),
        ("VV z zzzz O OOOO", "UTC UTC Coordinated Universal Time GMT GMT"),
        ("X XX XXX x xx xxx Z ZZZZ ZZZZZ", "Z Z Z +00 +0000 +00:00 +0000 GMT Z"),
        ("B", "in the morning"),
        ("[yyyy]", "2018"),
        ("", ""),
    ],
)
def test_format_timestamp_follows_java_pattern_letters(pattern, expected):
    assert format_timestamp(pattern, WHEN) == expected


def test_format_timestamp_afternoon_offsets_and_week_based_year():
    evening = datetime(2024, 12, 29, 19, 5, tzinfo=ZoneInfo("Asia/Kolkata"))  # a Sunday, +05:30
    assert format_timestamp("hh a B X XX XXX O ZZZZ VV z", evening) == (
        "07 PM in the evening +0530 +0530 +05:30 GMT+5:30 GMT+05:30 Asia/Kolkata IST"
    )
    # en_US weeks: the week holding 2025-01-01 (Sunday 2024-12-29 onwards) is week 1 of 2025.
    assert format_timestamp("YYYY-ww", evening) == "2025-01"
    assert format_timestamp("YYYY-ww", datetime(2021, 1, 2)) == "2021-01"
    assert format_timestamp("k", datetime(2021, 1, 2, 0, 0)) == "24"


@pytest.mark.parametrize("pattern", ["yyyy-MM-ddd", "'unterminated", "yyyy]", "#", "{", "bbb", "p", "ii", "HHH",
                                     "aa", "VVV", "EEEEEE", "SSSSSSSSSS", "cc", "OO"])
def test_format_timestamp_rejects_what_java_rejects(pattern):
    with pytest.raises(PatternError):
        format_timestamp(pattern, WHEN)


# ------------------------------------------------------------------- validation


def invalid(prefix, error_prefix, dynamic=False) -> str:
    with pytest.raises(AwsError) as caught:
        validate_prefixes(prefix, error_prefix, dynamic)
    assert caught.value.code == "InvalidArgumentException"
    assert caught.value.status == 400
    return caught.value.message


@pytest.mark.parametrize(
    "prefix, error_prefix, dynamic",
    [
        (None, None, False),
        ("logs/", None, False),
        ("logs/", "errors/", False),
        (None, "myFirehoseFailures/!{firehose:error-output-type}/", False),
        ("p/!{timestamp:yyyy}/", "e/!{firehose:error-output-type}/!{timestamp:yyyy}/", False),
        ("r/!{firehose:random-string}/", "e/!{firehose:error-output-type}", False),
        ("c=!{partitionKeyFromQuery:customer_id}/d=!{partitionKeyFromLambda:device}/",
         "e/!{firehose:error-output-type}/", True),
    ],
)
def test_valid_prefixes_pass(prefix, error_prefix, dynamic):
    validate_prefixes(prefix, error_prefix, dynamic)


def test_error_output_prefix_required_when_prefix_has_expressions():
    assert invalid("!{timestamp:yyyy/MM/dd}", None) == (
        "Ths supplied prefix(es) do not satisfy the following constraint: "
        "ErrorOutputPrefix cannot be null or empty when Prefix contains expressions"
    )
    assert invalid("!{timestamp:yyyy}", "") == invalid("!{timestamp:yyyy}", None)


def test_error_output_prefix_with_expressions_needs_the_error_type():
    assert invalid(None, "e/!{timestamp:yyyy}/") == (
        "ErrorOutputPrefix must contain at least one occurrence of !{firehose:error-output-type}"
    )


def test_prefix_cannot_use_the_error_type():
    assert invalid("p/!{firehose:error-output-type}/", "e/!{firehose:error-output-type}/") == (
        "Prefix must not contain any occurrence of !{firehose:error-output-type}"
    )


def test_partition_namespaces_need_dynamic_partitioning():
    assert invalid("c=!{partitionKeyFromQuery:id}/", "e/!{firehose:error-output-type}/") == (
        "Dynamic Partitioning Namespaces can only be part of a prefix expression when Dynamic Partitioning is enabled."
    )


def test_dynamic_partitioning_needs_partition_namespaces():
    assert invalid("p/!{timestamp:yyyy}/", "e/!{firehose:error-output-type}/", dynamic=True) == (
        "S3 Prefix should contain Dynamic Partitioning namespaces when Dynamic Partitioning is enabled"
    )
    assert invalid(None, None, dynamic=True) == (
        "S3 Prefix should contain Dynamic Partitioning namespaces when Dynamic Partitioning is enabled"
    )


def test_partition_namespaces_not_allowed_in_error_prefix():
    message = invalid("c=!{partitionKeyFromQuery:id}/", "e/!{firehose:error-output-type}/!{partitionKeyFromQuery:id}/",
                      dynamic=True)
    assert message == "Dynamic Partitioning Namespaces can't be part of an error prefix expression"


def test_unknown_namespace_and_bad_values():
    assert invalid("p/!{foo:bar}/", "e/!{firehose:error-output-type}") == (
        "Namespace to the left of colon (foo) is an invalid keyword!"
    )
    assert invalid("p/!{firehose:uuid}/", "e/!{firehose:error-output-type}") == (
        "Invalid conversion character used in the value of the expression in Prefix"
    )
    assert invalid("p/!{timestamp:yyyy-bb}/", "e/!{firehose:error-output-type}") == (
        "Invalid conversion character used in the value of the expression in Prefix"
    )
    assert invalid(None, "e/!{firehose:error-output-type}/!{timestamp:'oops}") == (
        "Invalid conversion character used in the value of the expression in ErrorOutputPrefix"
    )


def test_stray_expression_opener_is_invalid():
    assert invalid("p/!{timestamp/", None) == "Invalid expression usage"
    assert invalid("p/!{timestamp}/", None) == "Invalid expression usage"


def test_evaluated_prefix_length_is_limited_to_512():
    validate_prefixes("a" * 498, None, False)  # 498 + "yyyy/MM/dd/HH/" = 512
    assert invalid("a" * 499, None) == "Length of evaluated prefix cannot be greater than 512"
    long_error = "e" * 490 + "/!{firehose:error-output-type}/!{timestamp:yyyy}"
    assert invalid(None, long_error) == "Length of evaluated ErrorOutputPrefix cannot be greater than 512"
