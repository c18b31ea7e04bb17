"""Timestamps in JSON records as Firehose's deserializers read them: OpenX JSON SerDe's fixed forms
(ISO, SQL, epoch seconds or milliseconds) and Hive JSON SerDe's `TimestampFormats` (Joda patterns
the client writes, matched with RE2, or `millis`)."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

import re2

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")
_SQL = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?")
_EPOCH = re.compile(r"[+-]?\d+(\.\d+)?")


def _from_parts(match: re.Match) -> datetime | None:
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micros = int((match.group(7) or "0").ljust(9, "0")[:6])
    try:
        return datetime(year, month, day, hour, minute, second, micros, tzinfo=timezone.utc)
    except ValueError:
        return None


def _epoch(number: float | int, millis: bool) -> datetime | None:
    try:
        if millis:
            return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=number)
        return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=number)
    except OverflowError:
        return None


def openx_timestamp(value: Any) -> datetime | None:
    if isinstance(value, str):
        text = value.strip()
        for pattern in (_ISO, _SQL):
            match = pattern.fullmatch(text)
            if match:
                return _from_parts(match)
        if not _EPOCH.fullmatch(text):
            return None
        value = float(text) if "." in text else int(text)
    if isinstance(value, float):
        return _epoch(value, millis=False)
    if isinstance(value, int):
        # Epoch seconds and milliseconds are told apart by size: 10^11 s is the year 5138.
        return _epoch(value, millis=abs(value) >= 10**11)
    return None


def hive_timestamp(value: Any, formats: list[str]) -> datetime | None:
    for fmt in formats:
        if fmt == "millis":
            if isinstance(value, int) or (isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip())):
                return _epoch(int(value), millis=True)
            continue
        if isinstance(value, str):
            parsed = joda_parse(fmt, value.strip())
            if parsed is not None:
                return parsed
    if isinstance(value, str):
        match = _SQL.fullmatch(value.strip())  # java.sql.Timestamp.valueOf
        if match:
            return _from_parts(match)
    return None


# Joda pattern letters a Hive TimestampFormats entry may use, as regex groups. `\p{Nd}` is what
# `\d` meant when these were `re` patterns (any Unicode decimal digit, which int() reads).
_JODA_FIELDS = {
    "y": r"(?P<y>[+-]?\p{Nd}{1,9})", "Y": r"(?P<y>[+-]?\p{Nd}{1,9})", "x": r"(?P<y>[+-]?\p{Nd}{1,9})",
    "M": r"(?P<M>\p{Nd}{1,2})", "d": r"(?P<d>\p{Nd}{1,2})", "H": r"(?P<H>\p{Nd}{1,2})",
    "k": r"(?P<H>\p{Nd}{1,2})", "h": r"(?P<h>\p{Nd}{1,2})", "K": r"(?P<h>\p{Nd}{1,2})",
    "m": r"(?P<m>\p{Nd}{1,2})", "s": r"(?P<s>\p{Nd}{1,2})", "S": r"(?P<S>\p{Nd}{1,9})",
    "a": r"(?P<a>[AaPp][Mm])", "D": r"(?P<D>\p{Nd}{1,3})",
    "Z": r"(?P<Z>Z|[+-]\p{Nd}{2}:?\p{Nd}{2})", "E": r"[A-Za-z]+",
}
_MONTH_NAMES = {name: i + 1 for i, name in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # RE2 would print each refused pattern on the server's stderr
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_GROUP_NAME = re.compile(r"\(\?P<(\w+)>")


@lru_cache(maxsize=256)
def _joda_regex(pattern: str) -> Any:
    """A Joda pattern as a compiled RE2 regex, or None for a pattern Hive could not use.

    RE2, not `re`: the client writes the pattern, and `E` (and `MMM`) are repeatable letter runs,
    so `E'a'E'a'...'b'` made `re` backtrack exponentially on every record value (10 pairs on 40
    letters: 2.5 s of the server's interpreter per value). RE2 matches in time linear in the value
    and picks the same groups as `re` did (leftmost-first submatches)."""
    regex: list[str] = []
    fields: set[str] = set()
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                return None
            regex.append(re.escape(pattern[i + 1 : end] or "'"))
            i = end + 1
            continue
        count = 1
        while i + count < len(pattern) and pattern[i + count] == char:
            count += 1
        i += count
        if not char.isalpha():
            regex.append(re.escape(char * count))
            continue
        field = r"(?P<MMM>[A-Za-z]+)" if char == "M" and count >= 3 else _JODA_FIELDS.get(char)
        if field is None:
            return None
        name = _GROUP_NAME.match(field)
        if name:
            if name[1] in fields:  # a field given twice (`re` refused the repeated group name)
                return None
            fields.add(name[1])
        regex.append(field)
    try:
        return re2.compile("".join(regex), _RE2_OPTIONS)
    except (re2.error, UnicodeEncodeError):  # a lone surrogate: RE2 reads UTF-8
        return None


def joda_parse(pattern: str, text: str) -> datetime | None:
    compiled = _joda_regex(pattern)
    if compiled is None:
        return None
    try:
        match = compiled.fullmatch(text)
    except UnicodeEncodeError:  # RE2 reads UTF-8, which has no lone surrogate: one U+FFFD each
        match = compiled.fullmatch(_LONE_SURROGATE.sub("\ufffd", text))
    if not match:
        return None
    parts = match.groupdict()
    try:
        month = _MONTH_NAMES[parts["MMM"][:3].lower()] if parts.get("MMM") else int(parts.get("M") or 1)
        hour = int(parts.get("H") or 0)
        if parts.get("h") is not None:
            hour = int(parts["h"]) % 12 + (12 if (parts.get("a") or "").lower() == "pm" else 0)
        result = datetime(int(parts.get("y") or 1970), month, int(parts.get("d") or 1), hour,
                          int(parts.get("m") or 0), int(parts.get("s") or 0),
                          int((parts.get("S") or "0").ljust(9, "0")[:6]), tzinfo=timezone.utc)
        if parts.get("D"):
            result = result.replace(month=1, day=1) + timedelta(days=int(parts["D"]) - 1)
        zone = parts.get("Z")
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            result -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        return result
    except (KeyError, ValueError, OverflowError):
        return None
