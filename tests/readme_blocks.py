"""README.md and the docs/ pages as the README tests read them: their sections and their fenced code
blocks, each block named by the heading above it ("Kinesis queues #1"), so that a test can say which
block it runs or skips. A heading that more than one page has names its blocks with the page's path
too ("docs/kinesis.md: Kinesis queues #1"), so that every name stays unique."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# The front page first, then every page of docs/, by name.
PAGES: dict[str, str] = {"README.md": README} | {
    f"docs/{path.name}": path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}


@dataclass(frozen=True)
class Block:
    section: str    # the nearest heading above it, without its #s
    number: int     # 1 for the first block under that heading in its page
    language: str   # what follows the opening fence: "sh", "python", ...
    code: str
    line: int       # line of the opening fence in its page
    page: str = "README.md"  # the page's path from the repository's root
    qualified: bool = False  # another page has a heading of the same title: the name says the page

    @property
    def name(self) -> str:
        return f"{self.page}: {self.section} #{self.number}" if self.qualified else f"{self.section} #{self.number}"

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of every heading outside code blocks (lines inside a block, such as shell
    comments, are not headings)."""
    found, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (heading := re.match(r"(#{1,6}) (.+)", line)):
            found.append((len(heading[1]), heading[2].strip()))
    return found


def _page_blocks(text: str, page: str) -> list[Block]:
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
            found.append(Block(section, counts[section], fence[0], "\n".join(body) + "\n", fence[1], page))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{page} line {fence[1]}: a code block is never closed"
    return found


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced block: README's, then each docs/ page's, in page order (of `text` alone if given)."""
    if text is not None:
        return _page_blocks(text, "README.md")
    titles: dict[str, set[str]] = {}
    for page, page_text in PAGES.items():
        for _, title in headings(page_text):
            titles.setdefault(title, set()).add(page)
    return [Block(b.section, b.number, b.language, b.code, b.line, b.page, len(titles.get(b.section, ())) > 1)
            for page, page_text in PAGES.items() for b in _page_blocks(page_text, page)]


def section(title: str) -> str:
    """The text of the section headed `title` (`## title`, or the page itself for its `# title`), up to
    the next heading of its level or above, in whichever page has it (exactly one must)."""
    found = []
    for page, text in PAGES.items():
        lines, fence, start, level = text.splitlines(keepends=True), False, None, 0
        for number, line in enumerate(lines):
            if line.startswith("```"):
                fence = not fence
            elif not fence and (heading := re.match(r"(#{1,6}) (.+)", line)):
                if start is None and heading[2].strip() == title:
                    start, level = number, len(heading[1])
                elif start is not None and len(heading[1]) <= level:
                    found.append((page, "".join(lines[start:number])))
                    break
        else:
            if start is not None:
                found.append((page, "".join(lines[start:])))
    assert len(found) == 1, f"section {title!r}: in {[page for page, _ in found] or 'no page'}"
    return found[0][1]
