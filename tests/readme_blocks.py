"""README.md as the README tests read it: its sections and its fenced code blocks, each block named
by the heading above it ("Kinesis queues #1"), so that a test can say which block it runs or skips."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


@dataclass(frozen=True)
class Block:
    section: str    # the nearest heading above it, without its #s
    number: int     # 1 for the first block under that heading
    language: str   # what follows the opening fence: "sh", "python", ...
    code: str
    line: int       # README line of the opening fence

    @property
    def name(self) -> str:
        return f"{self.section} #{self.number}"


def blocks(text: str = README) -> list[Block]:
    """Every fenced block, in README order. Lines inside a block (shell comments start with #)
    are not headings."""
    found: list[Block] = []
    section, fence, body, counts = "", None, [], {}
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if (opening := re.match(r"```(\w*)\s*$", line)):
                fence, body = (opening[1], number), []
            elif (heading := re.match(r"#{1,6} (.+)", line)):
                section = heading[1].strip()
        elif line.startswith("```"):
            counts[section] = counts.get(section, 0) + 1
            found.append(Block(section, counts[section], fence[0], "\n".join(body) + "\n", fence[1]))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"README line {fence[1]}: a code block is never closed"
    return found


def section(title: str) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]
