"""S3 object keys exactly as Firehose names them, and the prefix rules AWS checks.

An object key is ``<evaluated prefix><suffix>`` (AWS: "Configure Amazon S3 object name
format", "Understand custom prefixes for Amazon S3 objects"):

- suffix: ``<DeliveryStreamName>-<DeliveryStreamVersion>-YYYY-MM-DD-HH-MM-SS-<uuid><ext>``;
- no Prefix: the default time prefix ``YYYY/MM/dd/HH/``;
- a Prefix without expressions: that text followed by ``YYYY/MM/dd/HH/``; AWS inserts no "/"
  between them (``logs`` gives ``logs2024/...``), so users write ``logs/``;
- a Prefix with ``!{namespace:value}`` expressions: just its evaluation, nothing appended
  (the documented examples evaluate ``myPrefix/!{timestamp:yyyy}`` to ``myPrefix/2018``);
- error output (records that failed processing / format conversion / partitioning) goes to
  the ErrorOutputPrefix. Without expressions (or unset) it is ``<ErrorOutputPrefix or, when
  that is unset, the Prefix><error-output-type>/YYYY/MM/dd/HH/``; with expressions it is
  evaluated as is (it must then contain ``!{firehose:error-output-type}``).

Namespaces: ``timestamp`` (a Java DateTimeFormatter pattern, see `format_timestamp`),
``firehose`` (``random-string``: 11 random characters, a new one per occurrence;
``error-output-type``: ``processing-failed``, ``format-conversion-failed``, ...),
``partitionKeyFromQuery`` / ``partitionKeyFromLambda`` (a dynamic-partitioning key).

Interface used by the delivery service:

- ``object_key(prefix, stream_name, version, when, *, error_output_type=None,
  partition_keys=None, extension="", random=None) -> str``. ``when`` is the approximate
  arrival time of the oldest record in the object; a naive datetime is UTC, an aware one
  is formatted in its own zone (pass ``when.astimezone(ZoneInfo(CustomTimeZone))`` for a
  CustomTimeZone). For error output pass ``error_prefix_template(Prefix, ErrorOutputPrefix)``
  as ``prefix`` together with ``error_output_type``. ``partition_keys`` maps both
  ``partitionKeyFromQuery`` and ``partitionKeyFromLambda`` names: pass
  ``{"query": {...}, "lambda": {...}}`` or one flat dict used for both.
  ``extension`` is the FileExtension, or else the default ``conversion.extension(...)`` /
  ``compression.extension(...)`` (AWS: an empty FileExtension means the default).
  ``random()`` returns a UUID-like string: the suffix uses it whole, each
  ``!{firehose:random-string}`` its first 11 characters (AWS's look like ``046b6c7f-0b``).
- ``error_prefix_template(prefix, error_prefix) -> str`` (see above).
- ``validate_prefixes(prefix, error_prefix, dynamic_partitioning) -> None`` raises
  ``AwsError("InvalidArgumentException", <AWS's message>)`` at CreateDeliveryStream /
  UpdateDestination time.
- ``validate_backup_prefix(prefix) -> None``: the same, for an S3 backup configuration's Prefix.
- ``check_storable(label, template, key_problem, error_output_type=None) -> None`` raises
  InvalidArgumentException when the keys a prefix makes cannot be stored (kinesim's rule, see there).
- ``format_timestamp(pattern, when) -> str`` formats a Java DateTimeFormatter pattern.
- ``expressions(text) -> list[(namespace, value)]`` lists a prefix's expressions.
"""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime, timedelta, timezone
from typing import Callable

from kinesim.protocol.errors import invalid_argument

ERROR_OUTPUT_TYPES = (
    "processing-failed",
    "format-conversion-failed",
    "elasticsearch-failed",
    "AmazonOpenSearchService-failed",
    "splunk-failed",
    "http-endpoint-failed",
)
S3_FAILED = "s3-failed"          # kinesim's error-output-type for records S3 never accepted
NAMESPACES = ("timestamp", "firehose", "partitionKeyFromQuery", "partitionKeyFromLambda")
PARTITION_NAMESPACES = ("partitionKeyFromQuery", "partitionKeyFromLambda")
RANDOM_STRING_LENGTH = 11
MAX_EVALUATED_PREFIX_LENGTH = 512

_DEFAULT_TIME_PATTERN = "yyyy/MM/dd/HH/"
# A well-formed expression; any other "!{" in a prefix is a syntax error for AWS.
_EXPRESSION = re.compile(r"!\{([A-Za-z]+):([^{}]*)\}")


class PrefixEvaluationError(ValueError):
    """A prefix that cannot be evaluated for these records (e.g. a partition key is missing).

    The delivery service routes such records to the error output instead.
    """


def expressions(text: str | None) -> list[tuple[str, str]]:
    """The (namespace, value) pairs of the ``!{namespace:value}`` expressions in ``text``."""
    return _EXPRESSION.findall(text or "")


def error_prefix_template(prefix: str | None, error_prefix: str | None) -> str:
    """The template error output is keyed under: the ErrorOutputPrefix, or the Prefix if unset.

    An unset ErrorOutputPrefix is only valid when the Prefix has no expressions
    (`validate_prefixes`), so the Prefix is then plain text.
    """
    if error_prefix:
        return error_prefix
    return "" if expressions(prefix) else (prefix or "")


def object_key(
    prefix: str | None,
    stream_name: str,
    version: int,
    when: datetime,
    *,
    error_output_type: str | None = None,
    partition_keys: dict | None = None,
    extension: str = "",
    random: Callable[[], str] | None = None,
) -> str:
    """The key Firehose writes an object under; see the module docstring for the rules."""
    random = random or (lambda: str(uuid.uuid4()))
    when = _zoned(when)
    evaluated = evaluate_prefix(
        prefix, when, error_output_type=error_output_type, partition_keys=partition_keys, random=random
    )
    suffix = f"{stream_name}-{version}-{when:%Y-%m-%d-%H-%M-%S}-{random()}{extension}"
    return evaluated + suffix


def evaluate_prefix(
    prefix: str | None,
    when: datetime,
    *,
    error_output_type: str | None = None,
    partition_keys: dict | None = None,
    random: Callable[[], str] | None = None,
) -> str:
    """The evaluated prefix part of a key (`object_key` without the suffix).

    Raises PrefixEvaluationError when a partition key is missing or the error output type
    is needed but not given.
    """
    random = random or (lambda: str(uuid.uuid4()))
    when = _zoned(when)
    text = prefix or ""
    if not expressions(text):
        # Plain text: AWS appends the type (for error output) and the default time prefix.
        kind = f"{error_output_type}/" if error_output_type else ""
        return text + kind + format_timestamp(_DEFAULT_TIME_PATTERN, when)
    query_keys, lambda_keys = _split_partition_keys(partition_keys)

    def evaluate(match: re.Match) -> str:
        namespace, value = match.group(1), match.group(2)
        if namespace == "timestamp":
            return format_timestamp(value, when)
        if namespace == "firehose":
            if value == "random-string":
                return random()[:RANDOM_STRING_LENGTH]
            if value == "error-output-type":
                if not error_output_type:
                    raise PrefixEvaluationError("!{firehose:error-output-type} is only valid in error output")
                return error_output_type
            raise PrefixEvaluationError(f"unknown value for the firehose namespace: {value}")
        keys = query_keys if namespace == "partitionKeyFromQuery" else lambda_keys
        if value not in keys:
            raise PrefixEvaluationError(f"no value for the partition key {value} ({namespace})")
        return str(keys[value])

    return _EXPRESSION.sub(evaluate, text)


def _split_partition_keys(partition_keys: dict | None) -> tuple[dict, dict]:
    keys = partition_keys or {}
    if set(keys) <= {"query", "lambda"} and all(isinstance(v, dict) for v in keys.values()):
        return keys.get("query", {}), keys.get("lambda", {})
    return keys, keys


def _zoned(when: datetime) -> datetime:
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


# ---------------------------------------------------------------- validation (Create time)

# AWS's own texts (including the "Ths" typo of the first one), as returned by
# CreateDeliveryStream / UpdateDestination.
_ERROR_PREFIX_REQUIRED = (
    "Ths supplied prefix(es) do not satisfy the following constraint: "
    "ErrorOutputPrefix cannot be null or empty when Prefix contains expressions"
)
_ERROR_TYPE_REQUIRED = (
    "ErrorOutputPrefix must contain at least one occurrence of !{firehose:error-output-type}"
)
_ERROR_TYPE_IN_PREFIX = "Prefix must not contain any occurrence of !{firehose:error-output-type}"
_PARTITION_IN_ERROR_PREFIX = "Dynamic Partitioning Namespaces can't be part of an error prefix expression"
_PARTITION_WITHOUT_DP = (
    "Dynamic Partitioning Namespaces can only be part of a prefix expression "
    "when Dynamic Partitioning is enabled."
)
_DP_WITHOUT_PARTITION = (
    "S3 Prefix should contain Dynamic Partitioning namespaces when Dynamic Partitioning is enabled"
)


def validate_prefixes(prefix: str | None, error_prefix: str | None, dynamic_partitioning: bool) -> None:
    """Reject what CreateDeliveryStream rejects in Prefix / ErrorOutputPrefix.

    Raises AwsError InvalidArgumentException with AWS's message.
    """
    for field, text in (("Prefix", prefix), ("ErrorOutputPrefix", error_prefix)):
        _check_expression_syntax(field, text or "")
    prefix_exprs = expressions(prefix)
    error_exprs = expressions(error_prefix)
    if ("firehose", "error-output-type") in prefix_exprs:
        raise invalid_argument(_ERROR_TYPE_IN_PREFIX)
    if error_exprs and ("firehose", "error-output-type") not in error_exprs:
        raise invalid_argument(_ERROR_TYPE_REQUIRED)
    if prefix_exprs and not error_prefix:
        raise invalid_argument(_ERROR_PREFIX_REQUIRED)
    if any(ns in PARTITION_NAMESPACES for ns, _ in error_exprs):
        raise invalid_argument(_PARTITION_IN_ERROR_PREFIX)
    has_partition_keys = any(ns in PARTITION_NAMESPACES for ns, _ in prefix_exprs)
    if has_partition_keys and not dynamic_partitioning:
        raise invalid_argument(_PARTITION_WITHOUT_DP)
    if dynamic_partitioning and not has_partition_keys:
        raise invalid_argument(_DP_WITHOUT_PARTITION)
    _check_length("prefix", prefix, None)
    if error_prefix:
        _check_length("ErrorOutputPrefix", error_prefix, "format-conversion-failed")


def validate_backup_prefix(prefix: str | None) -> None:
    """Reject what a Prefix may not be, for the Prefix of an S3 backup configuration: AWS ignores
    its ErrorOutputPrefix (s3-prefixes.html, "Semantic rules"), and its records are not partitioned,
    so only the rules of the Prefix itself apply."""
    _check_expression_syntax("Prefix", prefix or "")
    found = expressions(prefix)
    if ("firehose", "error-output-type") in found:
        raise invalid_argument(_ERROR_TYPE_IN_PREFIX)
    if any(ns in PARTITION_NAMESPACES for ns, _ in found):
        raise invalid_argument(_PARTITION_WITHOUT_DP)
    _check_length("prefix", prefix, None)


def _check_expression_syntax(field: str, text: str) -> None:
    if "!{" in _EXPRESSION.sub("", text):
        raise invalid_argument("Invalid expression usage")
    for namespace, value in expressions(text):
        if namespace not in NAMESPACES:
            raise invalid_argument(f"Namespace to the left of colon ({namespace}) is an invalid keyword!")
        invalid = f"Invalid conversion character used in the value of the expression in {field}"
        if namespace == "firehose" and value not in ("random-string", "error-output-type"):
            raise invalid_argument(invalid)
        if namespace in PARTITION_NAMESPACES and not value:
            raise invalid_argument(invalid)
        if namespace == "timestamp":
            try:
                format_timestamp(value, datetime(2000, 1, 1, tzinfo=timezone.utc))
            except PatternError:
                raise invalid_argument(invalid) from None


_SAMPLE_TIME = datetime(2000, 12, 31, 23, 59, 59, tzinfo=timezone.utc)


def _sample_keys(template: str | None) -> dict[str, str]:
    # Partition key values are unknown at create time: each is taken as "x" (so an evaluated
    # length is a lower bound).
    return {name: "x" for ns, name in expressions(template) if ns in PARTITION_NAMESPACES}


def _sample(template: str | None, error_output_type: str | None) -> str:
    """The template evaluated as at create time."""
    return evaluate_prefix(template, _SAMPLE_TIME, error_output_type=error_output_type,
                           partition_keys=_sample_keys(template), random=lambda: "x" * 36)


def _check_length(label: str, template: str | None, error_output_type: str | None) -> None:
    if len(_sample(template, error_output_type)) > MAX_EVALUATED_PREFIX_LENGTH:
        raise invalid_argument(f"Length of evaluated {label} cannot be greater than {MAX_EVALUATED_PREFIX_LENGTH}")


def check_storable(label: str, template: str | None, key_problem: Callable[[str], str | None],
                   error_output_type: str | None = None) -> None:
    """Refuse a prefix whose object keys the object store cannot hold (`key_problem(key)`: why not,
    or None).

    kinesim's rule, not AWS's: S3 keys may hold "..", "//" or a leading "/", and AWS accepts such
    a prefix; kinesim keeps each object as a file in its bucket's directory and refuses those keys,
    so every delivery under that prefix would fail. Refused here, at CreateDeliveryStream /
    UpdateDestination, instead. Partition key values are checked when records are delivered.
    """
    key = object_key(template, "stream", 1, _SAMPLE_TIME, error_output_type=error_output_type,
                     partition_keys=_sample_keys(template), random=lambda: "x" * 36)
    problem = key_problem(key)
    if problem:
        raise invalid_argument(f"{label} {template!r} makes object keys kinesim cannot store. {problem}")


# ------------------------------------------------- Java DateTimeFormatter pattern formatting


class PatternError(ValueError):
    """A pattern java.time.format.DateTimeFormatter.ofPattern would reject."""


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_QUARTERS = ["1st quarter", "2nd quarter", "3rd quarter", "4th quarter"]
_RESERVED = "#{}"


def format_timestamp(pattern: str, when: datetime) -> str:
    """Format ``when`` with a Java DateTimeFormatter pattern, as Firehose's JVM does.

    Letters and counts follow DateTimeFormatter.ofPattern in the en_US locale (weeks start on
    Sunday, week 1 is the week containing January 1); quoted text is literal, ``''`` is a
    quote, ``[``/``]`` optional sections print their content. Raises PatternError for what
    Java rejects.
    """
    when = _zoned(when)
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            # 'text' is literal, and '' (inside or outside quotes) is one quote.
            end = i + 1
            text: list[str] = []
            while True:
                if end >= len(pattern):
                    raise PatternError("Pattern ends with an incomplete string literal: " + pattern)
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'" and end > i + 1:
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            out.append("'" if end == i + 1 else "".join(text))
            i = end + 1
        elif char.isascii() and char.isalpha():
            count = 1
            while i + count < len(pattern) and pattern[i + count] == char:
                count += 1
            out.append(_field(char, count, when))
            i += count
        elif char == "[":
            depth += 1
            i += 1
        elif char == "]":
            if depth == 0:
                raise PatternError("Pattern invalid as it contains ] without previous [")
            depth -= 1
            i += 1
        elif char in _RESERVED:
            raise PatternError(f"Pattern includes reserved character: '{char}'")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _number(value: int, count: int, max_count: int = 19) -> str:
    if count > max_count:
        raise PatternError("Too many pattern letters")
    return str(value).zfill(count)


def _text(count: int, short: str, full: str, narrow: str) -> str:
    if count > 5:
        raise PatternError("Too many pattern letters")
    return full if count == 4 else narrow if count == 5 else short


def _two_digit_field(value: int, count: int) -> str:
    if count > 2:
        raise PatternError("Too many pattern letters")
    return str(value).zfill(count)


def _year(value: int, count: int) -> str:
    if count == 2:
        return str(value % 100).zfill(2)
    text = str(abs(value)).zfill(count)
    if value < 0:
        return "-" + text
    # Java's SignStyle.EXCEEDS_PAD (4 letters or more) signs a year wider than the pad.
    return "+" + text if count >= 4 and len(str(value)) > count else text


def _sunday_based_weekday(day: date) -> int:
    return (day.weekday() + 1) % 7 + 1  # Sunday=1 ... Saturday=7 (en_US)


def _week_based_year(day: date) -> tuple[int, int]:
    """(week-based-year, week-of-week-based-year) with Sunday-start weeks, minimal days 1."""
    saturday = day + timedelta(days=7 - _sunday_based_weekday(day))
    year = saturday.year
    jan1 = date(year, 1, 1)
    week1_start = jan1 - timedelta(days=_sunday_based_weekday(jan1) - 1)
    return year, (day - week1_start).days // 7 + 1


def _day_period(when: datetime) -> str:
    minutes = when.hour * 60 + when.minute
    if minutes == 0 and when.second == 0 and when.microsecond == 0:
        return "midnight"
    if minutes == 12 * 60 and when.second == 0 and when.microsecond == 0:
        return "noon"
    if 6 * 60 <= minutes < 12 * 60:
        return "in the morning"
    if 12 * 60 <= minutes < 18 * 60:
        return "in the afternoon"
    if 18 * 60 <= minutes < 21 * 60:
        return "in the evening"
    return "at night"


def _offset(when: datetime, count: int, letter: str) -> str:
    seconds = int(when.utcoffset().total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if letter in "Xx":
        if count > 5:
            raise PatternError("Too many pattern letters: " + letter)
        if seconds == 0 and letter == "X":
            return "Z"
        shapes = {1: "+HHmm", 2: "+HHMM", 3: "+HH:MM", 4: "+HHMMss", 5: "+HH:MM:ss"}
        shape = shapes[count]
        if seconds == 0:
            return {1: "+00", 2: "+0000", 3: "+00:00", 4: "+0000", 5: "+00:00"}[count]
        text = sign + f"{hours:02d}"
        colon = ":" if ":" in shape else ""
        if shape.endswith("mm") and minutes == 0:  # "+HHmm": minutes only when non-zero
            return text
        text += colon + f"{minutes:02d}"
        if shape.endswith("ss") and secs:
            text += colon + f"{secs:02d}"
        return text
    if letter == "Z":
        if count <= 3:
            return sign + f"{hours:02d}{minutes:02d}"
        if count == 4:
            return _localized_offset(seconds, full=True)
        if count == 5:
            return "Z" if seconds == 0 else sign + f"{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")
        raise PatternError("Too many pattern letters: Z")
    # 'O'
    if count == 1:
        return _localized_offset(seconds, full=False)
    if count == 4:
        return _localized_offset(seconds, full=True)
    raise PatternError("Pattern letter count must be 1 or 4: O")


def _localized_offset(seconds: int, full: bool) -> str:
    if seconds == 0:
        return "GMT"
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if full:
        return f"GMT{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")
    return f"GMT{sign}{hours}" + (f":{minutes:02d}" if minutes or secs else "") + (f":{secs:02d}" if secs else "")


def _zone_id(when: datetime) -> str:
    key = getattr(when.tzinfo, "key", None)  # zoneinfo.ZoneInfo
    if key:
        return key
    return "UTC" if when.utcoffset() == timedelta(0) else _offset(when, 5, "Z")


def _zone_name(when: datetime, full: bool) -> str:
    name = when.tzname() or "UTC"
    if full and name == "UTC":
        return "Coordinated Universal Time"
    return name


def _field(letter: str, count: int, when: datetime) -> str:  # noqa: C901 - one case per letter
    day = when.date()
    if letter in "uy":
        return _year(when.year, count)
    if letter == "Y":
        return _year(_week_based_year(day)[0], count)
    if letter in "ML":
        if count <= 2:
            return _number(when.month, count)
        name = _MONTHS[when.month - 1]
        return _text(count, name[:3], name, name[0])
    if letter in "Qq":
        quarter = (when.month - 1) // 3 + 1
        if count <= 2:
            return _number(quarter, count)
        return _text(count, f"Q{quarter}", _QUARTERS[quarter - 1], str(quarter))
    if letter == "d":
        return _two_digit_field(when.day, count)
    if letter == "D":
        return _number(when.timetuple().tm_yday, count, 3)
    if letter == "H":
        return _two_digit_field(when.hour, count)
    if letter == "h":
        return _two_digit_field((when.hour % 12) or 12, count)
    if letter == "k":
        return _two_digit_field(when.hour or 24, count)
    if letter == "K":
        return _two_digit_field(when.hour % 12, count)
    if letter == "m":
        return _two_digit_field(when.minute, count)
    if letter == "s":
        return _two_digit_field(when.second, count)
    if letter == "S":
        if count > 9:
            raise PatternError("Too many pattern letters: S")
        return f"{when.microsecond * 1000:09d}"[:count]
    if letter == "n":
        return _number(when.microsecond * 1000, count)
    if letter == "N":
        seconds = when.hour * 3600 + when.minute * 60 + when.second
        return _number(seconds * 10**9 + when.microsecond * 1000, count)
    if letter == "A":
        seconds = when.hour * 3600 + when.minute * 60 + when.second
        return _number(seconds * 1000 + when.microsecond // 1000, count)
    if letter == "a":
        if count > 1:
            raise PatternError("Too many pattern letters: a")
        return "AM" if when.hour < 12 else "PM"
    if letter == "B":
        if count not in (1, 4, 5):
            raise PatternError("Wrong number of pattern letters: B")
        return _day_period(when)
    if letter == "E":
        name = _DAYS[when.weekday()]
        return _text(count, name[:3], name, name[0])
    if letter in "ec":
        if count == 2 and letter == "c":
            raise PatternError("Invalid pattern \"cc\"")
        if count <= 2:
            return _number(_sunday_based_weekday(day), count)
        name = _DAYS[when.weekday()]
        return _text(count, name[:3], name, name[0])
    if letter == "F":
        return _number((when.day - 1) // 7 + 1, count, 1)
    if letter == "w":
        return _two_digit_field(_week_based_year(day)[1], count)
    if letter == "W":
        if count > 1:
            raise PatternError("Too many pattern letters: W")
        first = day.replace(day=1)
        return str((when.day - 1 + _sunday_based_weekday(first) - 1) // 7 + 1)
    if letter == "G":
        return _text(count, "AD", "Anno Domini", "A")
    if letter == "g":
        return _number((day - date(1858, 11, 17)).days, count)
    if letter in "XxZO":
        return _offset(when, count, letter)
    if letter == "V":
        if count != 2:
            raise PatternError("Pattern letter count must be 2: V")
        return _zone_id(when)
    if letter == "z":
        if count > 4:
            raise PatternError("Too many pattern letters: z")
        return _zone_name(when, full=count == 4)
    if letter == "v":
        if count not in (1, 4):
            raise PatternError("Wrong number of pattern letters: v")
        return _zone_name(when, full=count == 4)
    raise PatternError(f"Unknown pattern letter: {letter}")
