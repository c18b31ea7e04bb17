"""CloudWatch Logs filter patterns (FilterLogEvents' `filterPattern`), after AWS's "Filter pattern
syntax for metric filters, subscription filters, filter log events, and Live Tail":

- terms: `ERROR`, `"exact phrase"`, all required; `?ERROR ?WARN`, at least one; `-DEBUG`, none;
  `%regex%` (AWS's subset, at most two in a pattern: `filter_regex`). Terms are case sensitive
  and match whole words: `ERROR` is in `[ERROR 400]`, not in `NOERRORS` (a `%regex%` matches
  anywhere, which is why the docs show one for `UNAUTHORIZED`).
- JSON: `{ $.a.b[0] = "x" && ($.n > 5 || $.ok IS TRUE) }`, with `=`, `!=`, `<`, `<=`, `>`, `>=`,
  `*` wildcards in string values, `%regex%` values, `IS NULL`, `IS TRUE`, `IS FALSE`, `NOT EXISTS`.
- space-delimited: `[ip, user, ..., status = 4*, bytes > 1000]`: fields split on spaces, text in
  `""` or `[]` one field; `...` stands for any number of fields; a field's condition may use `&&`
  and `||` over any named field.

`compile_pattern(text)` gives a predicate over a message or raises PatternError with AWS's text.

Everything here takes time linear in the message (a client sends both the pattern and the
events): `%regex%` runs on RE2, `*` wildcards on `kinesim.wildcards`, fields are split without a
backtracking regex, and alignments of `...` are bounded.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import orjson

from ..wildcards import wildcard_matcher
from .filter_regex import MAX_REGEXES, UnsupportedRegex, compile_regex

Predicate = Callable[[str], bool]
INVALID = "Invalid filter pattern"


class PatternError(ValueError):
    pass


def compile_pattern(text: str | None) -> Predicate:
    try:
        return _compile(text)
    except RecursionError:  # parentheses nested hundreds deep
        raise PatternError(INVALID) from None
    except orjson.JSONDecodeError:  # a quoted value with an escape JSON has not (`"a\\qb"`)
        raise PatternError(INVALID) from None


def _compile(text: str | None) -> Predicate:
    pattern = (text or "").strip()
    if not pattern:
        return lambda message: True
    if pattern.startswith("{"):
        if not pattern.endswith("}"):
            raise PatternError("If a filter pattern starts with '{' it must end with '}'")
        return _json_pattern(pattern[1:-1])
    if pattern.startswith("["):
        if not pattern.endswith("]"):
            raise PatternError("If a filter pattern starts with '[' it must end with ']'")
        return _delimited_pattern(pattern[1:-1])
    return _terms_pattern(pattern)


# --- values shared by JSON and space-delimited patterns -------------------------------------------

_TOKEN = re.compile(r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<re>%[^%]+%)|(?P<op>&&|\|\||!=|<=|>=|=|<|>|\(|\)|,)"""
                    r"""|(?P<word>[^\s"()=<>!&|,]+))""")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise PatternError(INVALID)
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


@dataclass(frozen=True)
class _Regex:
    """A `%regex%` value: matches string values only."""
    search: Callable[[str], bool]


@dataclass(frozen=True)
class _Wildcard:
    """A string value with `*` in it: matches the text of strings, numbers and booleans."""
    matches: Callable[[str], bool]


def _regex(token: str) -> Callable[[str], bool]:
    try:
        return compile_regex(token[1:-1])
    except UnsupportedRegex:
        raise PatternError(INVALID) from None


def _check_regex_count(count: int) -> None:
    # AWS's quota (see filter_regex); its answer is the same sentence as for any refused pattern.
    if count > MAX_REGEXES:
        raise PatternError(INVALID)


def _value(kind: str, token: str) -> Any:
    """A comparison's right side: a float, a _Regex, a _Wildcard or a string."""
    if kind == "str":
        text = orjson.loads(token) if "\\" in token else token[1:-1]
    elif kind == "re":
        return _Regex(_regex(token))
    elif kind == "word":
        if _NUMBER.fullmatch(token):
            return float(token)
        text = token
    else:
        raise PatternError(INVALID)
    return _Wildcard(wildcard_matcher(text)) if "*" in text else text


def _compare(actual: Any, op: str, expected: Any) -> bool:
    """`actual op expected` as AWS compares them: numbers numerically, strings by glob or regex."""
    if op in ("<", "<=", ">", ">="):
        number = _as_number(actual)
        if number is None:
            return False
        return {"<": number < expected, "<=": number <= expected,
                ">": number > expected, ">=": number >= expected}[op]
    if isinstance(expected, _Regex):
        equal = isinstance(actual, str) and expected.search(actual)
    elif isinstance(expected, float):
        number = _as_number(actual)
        equal = number is not None and number == expected
    else:
        text = actual if isinstance(actual, str) else _text(actual)
        equal = text is not None and (expected.matches(text) if isinstance(expected, _Wildcard) else text == expected)
    return equal if op == "=" else not equal


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return float(value)
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    return str(value)


class _Parser:
    """Recursive descent over `a op v && (b op v || ...)`; `leaf` parses one comparison."""

    def __init__(self, tokens: list[tuple[str, str]], leaf: Callable[["_Parser"], Callable[[Any], bool]]):
        self.tokens, self.pos, self.leaf = tokens, 0, leaf

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise PatternError(INVALID)
        self.pos += 1
        return token

    def parse(self) -> Callable[[Any], bool]:
        expr = self.disjunction()
        if self.peek() is not None:
            raise PatternError(INVALID)
        return expr

    def disjunction(self) -> Callable[[Any], bool]:
        parts = [self.conjunction()]
        while self.peek() == ("op", "||"):
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda doc: any(p(doc) for p in parts))

    def conjunction(self) -> Callable[[Any], bool]:
        parts = [self.unary()]
        while self.peek() == ("op", "&&"):
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else (lambda doc: all(p(doc) for p in parts))

    def unary(self) -> Callable[[Any], bool]:
        if self.peek() == ("op", "("):
            self.take()
            inner = self.disjunction()
            if self.take() != ("op", ")"):
                raise PatternError(INVALID)
            return inner
        return self.leaf(self)

    def comparison_value(self) -> tuple[str, Any]:
        kind, op = self.take()
        if kind != "op" or op not in ("=", "!=", "<", "<=", ">", ">="):
            raise PatternError(INVALID)
        value = _value(*self.take())
        if op in ("<", "<=", ">", ">=") and not isinstance(value, float):
            raise PatternError(INVALID)
        return op, value


# --- JSON ---------------------------------------------------------------------------------------

_SELECTOR = re.compile(r"\$((\.[A-Za-z0-9_@\-]+|\.\*|\[\d+\]|\[\*\])*)")
_STEP = re.compile(r"\.([A-Za-z0-9_@\-]+|\*)|\[(\d+|\*)\]")
_MISSING = object()


def _json_pattern(body: str) -> Predicate:
    tokens = _tokens(body)
    _check_regex_count(sum(kind == "re" for kind, _ in tokens))
    expr = _Parser(tokens, _json_leaf).parse()

    def match(message: str) -> bool:
        try:
            doc = orjson.loads(message)
        except orjson.JSONDecodeError:
            return False
        return isinstance(doc, (dict, list)) and expr(doc)
    return match


def _json_leaf(parser: _Parser) -> Callable[[Any], bool]:
    kind, text = parser.take()
    selector = _SELECTOR.fullmatch(text) if kind == "word" else None
    if selector is None:
        raise PatternError(INVALID)
    steps = [(m.group(1), m.group(2)) for m in _STEP.finditer(selector.group(1))]
    following = parser.peek()
    if following in (("word", "IS"), ("word", "NOT")):
        parser.take()
        word = parser.take()
        test = {("IS", "NULL"): lambda vs: any(v is None for v in vs),
                ("IS", "TRUE"): lambda vs: any(v is True for v in vs),
                ("IS", "FALSE"): lambda vs: any(v is False for v in vs),
                ("NOT", "EXISTS"): lambda vs: not vs}.get((following[1], word[1]))
        if test is None:
            raise PatternError(INVALID)
        return lambda doc: test(_select(doc, steps))
    op, value = parser.comparison_value()
    return lambda doc: any(_compare(v, op, value) for v in _select(doc, steps))


def _select(doc: Any, steps: list[tuple[str, str]]) -> list[Any]:
    values = [doc]
    for key, index in steps:
        found = []
        for value in values:
            if key == "*" and isinstance(value, dict):
                found.extend(value.values())
            elif key and key != "*" and isinstance(value, dict) and key in value:
                found.append(value[key])
            elif index == "*" and isinstance(value, list):
                found.extend(value)
            elif index and index != "*" and isinstance(value, list) and int(index) < len(value):
                found.append(value[int(index)])
        values = found
    return values


# --- space-delimited ----------------------------------------------------------------------------

_ELLIPSIS = "..."
_SPACES = re.compile(r"\s*")
_RUN = re.compile(r"\S+")
_CLOSERS = {'"': '"', "[": "]"}


def _delimited_pattern(body: str) -> Predicate:
    specs = [s.strip() for s in _split_fields(body)]
    if not specs or any(not s for s in specs):
        raise PatternError(INVALID)
    names: list[str | None] = []  # None: an ellipsis
    conditions = []
    regexes = 0
    for spec in specs:
        if spec == _ELLIPSIS:
            if not names or names[-1] is not None:  # `..., ...` is one ellipsis
                names.append(None)
            continue
        tokens = _tokens(spec)
        if tokens[0][0] != "word" or _NUMBER.fullmatch(tokens[0][1]):
            raise PatternError(INVALID)
        names.append(tokens[0][1])
        regexes += sum(kind == "re" for kind, _ in tokens)
        _check_regex_count(regexes)
        if len(tokens) > 1:
            conditions.append(_Parser(tokens, _delimited_leaf).parse())
    check = (lambda fields: all(c(fields) for c in conditions))

    def match(message: str) -> bool:
        return any(check(bound) for bound in _bindings(names, _message_fields(message)))
    return match


def _message_fields(message: str) -> list[str]:
    """The message's fields: runs of non-spaces, or text in `""` or `[]` taken whole, unwrapped.

    What `re.findall(r'"[^"]*"|\\[[^\\]]*\\]|\\S+', message)` finds, in linear time: that regex
    scans to the end of the message from every `[` with no `]` after it (a 256 KB line of
    `[ [ [ ...` took half a minute).
    """
    fields: list[str] = []
    pos, unclosed = 0, set()
    while True:
        pos = _SPACES.match(message, pos).end()
        if pos == len(message):
            return fields
        closer = _CLOSERS.get(message[pos])
        if closer is not None and closer not in unclosed:
            end = message.find(closer, pos + 1)
            if end >= 0:
                fields.append(message[pos + 1:end])
                pos = end + 1
                continue
            unclosed.add(closer)  # none after this opener: none after any later one either
        end = _RUN.match(message, pos).end()
        fields.append(_unwrapped(message[pos:end]))
        pos = end


def _split_fields(body: str) -> list[str]:
    """The pattern's comma-separated field specs (a comma inside a quoted value is no separator)."""
    out, current, quoted = [], [], False
    for ch in body:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return out


def _delimited_leaf(parser: _Parser) -> Callable[[dict[str, str]], bool]:
    kind, name = parser.take()
    if kind != "word":
        raise PatternError(INVALID)
    op, value = parser.comparison_value()
    return lambda fields: name in fields and _compare(fields[name], op, value)


def _unwrapped(field: str) -> str:
    if len(field) >= 2 and (field[0], field[-1]) in (('"', '"'), ("[", "]")):
        return field[1:-1]
    return field


# Alignments of a pattern with ellipses tried per message, at most: past it the message does not
# match (a pattern like `[..., a, ..., b, ..., c]` over a long line has very many).
_MAX_ALIGNMENTS = 10_000


def _bindings(names: list[str | None], fields: list[str]) -> Iterator[dict[str, str]]:
    """Ways to line the named fields up with the message's fields (an ellipsis takes any number)."""
    # An ellipsis leaves at least one field for each name after it, and the last ellipsis exactly
    # one: `[a, ...]` over a line of 20,000 fields is one alignment, not 20,000.
    names_after, count = [0] * len(names), 0
    for i in range(len(names) - 1, -1, -1):
        names_after[i] = count
        count += names[i] is not None
    last_ellipsis = max((i for i, n in enumerate(names) if n is None), default=-1)
    stack: list[tuple[int, int, dict[str, str]]] = [(0, 0, {})]
    steps = 0
    while stack and steps < _MAX_ALIGNMENTS:
        steps += 1
        i, j, bound = stack.pop()
        if i == len(names):
            if j == len(fields):
                yield bound
            continue
        name = names[i]
        if name is None:
            most = len(fields) - names_after[i]
            least = most if i == last_ellipsis else j
            stack.extend((i + 1, k, bound) for k in range(most, least - 1, -1) if k >= j)
        elif j < len(fields):
            stack.append((i + 1, j + 1, {**bound, name: fields[j]}))


# --- terms --------------------------------------------------------------------------------------

_TERM = re.compile(r'\s*([?-]?)(?:"((?:[^"\\]|\\.)*)"|(%[^%]+%)|([^\s"]+))')
_UNQUOTED_FORBIDDEN = set('{}[]()=<>!&|"')


def _terms_pattern(pattern: str) -> Predicate:
    required, optional, excluded = [], [], []
    pos, regexes = 0, 0
    while pos < len(pattern) and pattern[pos:].strip():
        match = _TERM.match(pattern, pos)
        if match is None:
            raise PatternError(INVALID)
        sign, quoted, regex, word = match.groups()
        if word is not None and _UNQUOTED_FORBIDDEN & set(word):
            raise PatternError(f"Invalid character(s) in term '{word}'")
        if regex is not None:
            regexes += 1
            _check_regex_count(regexes)
            term = _regex(regex)
        else:
            term = _word_matcher(orjson.loads(f'"{quoted}"') if quoted is not None and "\\" in quoted
                                 else quoted if quoted is not None else word)
        {"": required, "?": optional, "-": excluded}[sign].append(term)
        pos = match.end()

    def match_terms(message: str) -> bool:
        return (all(t(message) for t in required) and (not optional or any(t(message) for t in optional))
                and not any(t(message) for t in excluded))
    return match_terms


def _word_matcher(term: str) -> Callable[[str], Any]:
    if not term:
        return lambda message: True
    before = r"(?<![^\W_])" if term[0].isalnum() else ""
    after = r"(?![^\W_])" if term[-1].isalnum() else ""
    return re.compile(before + re.escape(term) + after).search
