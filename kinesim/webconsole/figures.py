"""Small helpers the console's areas share to turn state into figures: bounded query arguments,
epoch milliseconds, counted nouns, readable sizes, and the size of a directory tree."""
from __future__ import annotations

import os


def bounded(value: str | None, default: int, low: int, high: int) -> int:
    """A query argument as an int within [low, high] (`default` when absent); ValueError (400) when
    it is not a number."""
    if value is None or value == "":
        return default
    try:
        return max(low, min(high, int(value)))
    except ValueError:
        raise ValueError(f"not a number: {value!r}") from None


def ms(seconds: float | None) -> int | None:
    """Epoch seconds as the epoch milliseconds the pages take."""
    return None if seconds is None else int(seconds * 1000)


def plural(n: float, noun: str, many: str | None = None) -> str:
    """`noun` as it goes with `n`: "object" for 1, "objects" (or `many`) for any other count."""
    return noun if n == 1 else many or noun + "s"


def counted(n: int, noun: str, many: str | None = None) -> str:
    """A count and its noun, as the console's lines write them: "1 object", "1,024 objects",
    "0 dead letters"."""
    return f"{n:,} {plural(n, noun, many)}"


def size_text(n: int) -> str:
    units, value, i = ("B", "KiB", "MiB", "GiB", "TiB"), float(n), 0
    while value >= 1024 and i < len(units) - 1:
        value, i = value / 1024, i + 1
    return f"{n:,} B" if i == 0 else f"{value:,.1f} {units[i]}"


def tree_size(path: str, limit: int | None = None) -> tuple[int, int, bool]:
    """(files, bytes, capped) under `path`, stopping after `limit` files (capped: True); what
    disappears while it is walked is left out, links are not followed."""
    files = size = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:  # removed meanwhile
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    files += 1
                    size += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if limit is not None and files >= limit:
                return files, size, True
    return files, size, False
