"""Java regular expressions that clients send (the AllowedPattern of CloudFormation parameters and
of SSM parameters), matched against values clients send too, without holding the server.

Python's `re` backtracks with the interpreter held: `(a+)+$` against 34 a's and a b froze every
client of the server for as long as the match ran. So:

- RE2 first: its time is linear in the value, it releases the interpreter while it runs, and it
  takes what these patterns are almost always written with.
- What RE2 refuses is mostly what only a backtracking engine has (back references, look-around,
  possessive quantifiers, Java's `\\p{Alpha}` classes; CloudFormation password parameters are
  often written `^(?=.*[A-Z])(?=.*\\d).{8,}$`). Those are matched by the `regex` package in a child
  process under a time and memory limit: `regex` can also run for ever on a match, and its
  *compilation* alone can exhaust memory (`((((a{1000}){1000}){1000}){1000})` was killed by the
  kernel's OOM killer here), neither of which a thread could stop. Only a few run at once.

A value the child cannot decide within its limits counts as not matching: the caller refuses it
with its usual mismatch error, as AWS would after its own (undocumented) limits.
"""
from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import threading
from typing import Any, Callable

import re2

from .constraints import ascii_escapes

# Wall time and address space of one child match; children at once (each waits for a slot).
CHILD_SECONDS = 2.0
CHILD_MEMORY = 512 << 20
CHILD_SLOTS = threading.BoundedSemaphore(2)
# RE2's time is linear in the value but also in its program's size once it falls back from its DFA
# to its NFA (kinesim/logs/filter_regex.py measured 15 s for 9,005 instructions over 256 KB): a
# larger program is matched where a time limit holds.
MAX_RE2_PROGRAM = 10_000

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each pattern it refuses on the server's stderr
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# The child (it limits its own memory: a preexec_fn is unsafe in a threaded server): exit 0 on a match, 1 on none, 2 when `regex` cannot parse the pattern.
_CHILD = f"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))
import regex
pattern, value = json.load(sys.stdin)
try:
    compiled = regex.compile(pattern)
except regex.error:
    sys.exit(2)
sys.exit(0 if compiled.fullmatch(value) is not None else 1)
"""


class InvalidPattern(ValueError):
    """No engine takes the pattern as a regular expression."""


@functools.lru_cache(maxsize=256)
def full_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate: does a whole value match the Java regular expression `pattern` (Java's
    `Pattern.matches`)? Raises InvalidPattern for what is not one (with RE2's refusals, known when
    the child first runs it)."""
    java = ascii_escapes(pattern)  # Java's \d \w \s are ASCII-only, as RE2's (but its \s lacks \x0B)
    try:
        compiled = re2.compile(java, _OPTIONS)
    except (re2.error, UnicodeEncodeError):  # RE2 reads UTF-8: a lone surrogate is not one
        return functools.partial(_child_match, java)
    if compiled.programsize > MAX_RE2_PROGRAM:
        return functools.partial(_child_match, java)
    return re2_predicate(compiled.fullmatch)


def re2_predicate(method: Callable[[str], Any]) -> Callable[[str], bool]:
    """A predicate of an RE2 pattern's `search` or `fullmatch` that takes any str."""
    def matches(value: str) -> bool:
        try:
            return method(value) is not None
        except UnicodeEncodeError:  # RE2 reads UTF-8, which has no lone surrogate: one U+FFFD each
            return method(_LONE_SURROGATE.sub("\ufffd", value)) is not None
    return matches


def check(pattern: str) -> None:
    """Raise InvalidPattern when `pattern` is not a regular expression (without matching anything
    RE2 takes)."""
    full_matcher(pattern)("")


def _child_match(pattern: str, value: str) -> bool:
    with CHILD_SLOTS:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", _CHILD], input=json.dumps([pattern, value]),
                                  text=True, capture_output=True, timeout=CHILD_SECONDS)
        except subprocess.TimeoutExpired:  # run() has killed it
            return False
    if done.returncode == 2:
        raise InvalidPattern(pattern)
    return done.returncode == 0
