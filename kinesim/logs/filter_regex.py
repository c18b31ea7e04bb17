"""The `%regex%` terms of CloudWatch Logs filter patterns: AWS's subset checked, then compiled
with RE2, whose matching time is linear in the message and which releases the interpreter
while it runs. Python's `re` backtracks: `%a*a*a*a*a*a*a*a*a*b%` over 28 a's took 2.9 s and
every other call of the server waited as long.

AWS's "Supported regular expressions (regex) syntax" (CloudWatch Logs user guide):
- a regex may hold only ASCII letters and digits, the symbols `: _ # = @ / ; , -` and the
  operators `^ $ ? [ ] { } | \\ * + .` ("`%something!%` would be rejected"); no `(` `)`,
  no multi-byte characters. A space is taken too: the guide's own example is
  `%^starting|^initializing|^shutting down%`.
- escapes: an operator made literal (`\\.`), `\\d \\D \\s \\S \\w \\W` (ASCII classes: `\\w` is
  `[a-zA-Z_0-9]`, as RE2's), `\\xhh`; we also take the control characters `\\t \\n \\r \\f \\v`
  (the guide names tab and newline as what `\\s` matches) and the word boundaries `\\b \\B`.
- `{m,n}` where "either m or n can be omitted": `{,n}` is `{0,n}` (RE2 would read it literally).
- "a limit of 2 regex for each filter pattern" (PutMetricFilter's reference says the same of
  any filter pattern): `MAX_REGEXES`.
AWS answers a pattern it refuses with InvalidParameterException "Invalid filter pattern"; the
caller raises that when this module raises UnsupportedRegex.
"""
from __future__ import annotations

import string
from typing import Callable

import re2

from kinesim.protocol.java_regex import re2_predicate

MAX_REGEXES = 2

_ALLOWED = frozenset(string.ascii_letters + string.digits + ":_#=@/;,-" + "^$?[]{}|\\*+." + " ")
_ESCAPABLE = (_ALLOWED - frozenset(string.ascii_letters + string.digits)) | frozenset("dDsSwWx" "tnrfv" "bB")

# Not AWS's (it documents none): a bound on the compiled program, in RE2 instructions. RE2's
# time is linear in the message, but times the program's size when it falls back from its DFA
# to its NFA: `%\w{1000}\w{1000}\w{1000}x%` (9,005) takes 15 s over a 256 KB event, in its own
# thread, and twenty `\w{1000}` (RE2's own bound, 8 MB of program) would take minutes. The bound
# admits any single repetition RE2 allows, `%.{1000}%` being 8,004 (a `.` is any UTF-8
# sequence); patterns written to find log lines are far below it (an IPv4 address: 27).
MAX_PROGRAM_SIZE = 10_000

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each refused pattern on the server's stderr


class UnsupportedRegex(ValueError):
    pass


def compile_regex(body: str) -> Callable[[str], bool]:
    """A predicate: does the regex `body` (the text between the `%`s) match anywhere in a message?"""
    try:
        compiled = re2.compile(_translated(body), _OPTIONS)
    except re2.error:
        raise UnsupportedRegex(body) from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise UnsupportedRegex(body)

    return re2_predicate(compiled.search)

def _translated(body: str) -> str:
    """`body` checked against AWS's subset, in RE2's syntax with the meaning it had with `re`."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(body):
        ch = body[i]
        if ch not in _ALLOWED:
            raise UnsupportedRegex(body)
        if ch == "\\":
            escaped = body[i + 1:i + 2]
            if not escaped or escaped not in _ESCAPABLE:
                raise UnsupportedRegex(body)
            out.append(body[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
        elif ch == "[":
            in_class = True
            # `[]...]` and `[^]...]`: a `]` first in a class is one of its characters.
            opening = "[^" if body.startswith("[^", i) else "["
            if body.startswith("]", i + len(opening)):
                opening += "]"
            out.append(opening)
            i += len(opening)
            continue
        elif ch == "$":
            out.append(r"(?:\n?\z)")  # as `re` and Java: the end, or before a final newline
        elif ch == "{" and body.startswith(",", i + 1):
            out.append("{0")
        else:
            out.append(ch)
        i += 1
    return "".join(out)
