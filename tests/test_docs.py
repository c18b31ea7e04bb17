"""README.md as a front page and the docs/ pages behind it (issue 32): the front page stays short, maps
every page, each page says where its commands run, and every relative link and image of them leads to
a file that exists and, with a #fragment, to a heading of that file. The pages' code blocks run in
tests/test_readme_snippets.py."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
import urllib.parse

import pytest

from readme_blocks import PAGES, README, ROOT, blocks, headings, section

README_MAX_LINES = 320  # "a front page of at most ~300 lines"


def test_the_front_page_is_short():
    assert len(README.splitlines()) <= README_MAX_LINES


def test_the_documentation_map_links_every_docs_page():
    linked = {target for target, _ in _links(section("Documentation"))}
    pages = {page for page in PAGES if page.startswith("docs/")}
    assert sorted(pages - linked) == []


def test_every_docs_page_says_its_commands_run_from_the_repository_root():
    for page, text in PAGES.items():
        if page.startswith("docs/"):
            assert text.startswith("# "), page
            assert "Commands run from the repository's root" in "\n".join(text.splitlines()[:6]), page


def test_block_names_are_unique():
    names = [b.name for b in blocks()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


# ------------------------------------------------------------------ links

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (links as their text, no code marks), lowercased,
    punctuation but '-' and '_' dropped, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a page; a repeated one gets -1, -2... as GitHub numbers them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, title in headings(text):
        base = slug(title)
        anchor = base if base not in seen else f"{base}-{seen[base]}"
        seen[base] = seen.get(base, 0) + 1
        found.add(anchor)
    return found


def _links(text: str) -> list[tuple[str, str]]:
    """(target, fragment) of every inline link and image and every link definition outside code,
    relative ones only (no scheme, not mailto)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    prose = re.sub(r"(`+).*?\1", "", prose, flags=re.S)
    targets = re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)", prose)
    targets += re.findall(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", prose, flags=re.M)
    found = []
    for target in targets:
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:...
            continue
        path, _, fragment = target.partition("#")
        found.append((urllib.parse.unquote(path), urllib.parse.unquote(fragment)))
    return found


@pytest.mark.parametrize("page", list(PAGES))
def test_every_relative_link_and_image_resolves(page):
    here = (ROOT / page).parent
    broken = []
    for path, fragment in _links(PAGES[page]):
        file = ROOT / path.lstrip("/") if path.startswith("/") else (here / path if path else ROOT / page)
        shown = f"{path}#{fragment}" if fragment else path
        if not file.resolve().is_relative_to(ROOT):
            broken.append(f"{shown}: outside the repository")
        elif not file.exists():
            broken.append(f"{shown}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file.read_text()):
            broken.append(f"{shown}: no such heading in {file.relative_to(ROOT)}")
    assert broken == []


def test_the_links_checker_sees_what_is_broken(tmp_path):
    text = textwrap.dedent("""\
        # A `page`, with: punctuation

        ## Heading
        ## Heading

        [ok](#a-page-with-punctuation) [twice](#heading-1) ![image](docs/console-stream.png)
        [code `x`](README.md#the-two-commands) `[not a link](nowhere.md)` [web](https://example.com/x.md)

        ```sh
        [also not](nowhere.md)
        ```
        [bad](docs/nowhere.md) [bad anchor](#heading-2) [ref]: docs/testing.md#a-first-test
        """)
    assert _links(text) == [("", "a-page-with-punctuation"), ("", "heading-1"), ("docs/console-stream.png", ""),
                            ("README.md", "the-two-commands"), ("docs/nowhere.md", ""), ("", "heading-2")]
    assert anchors(text) == {"a-page-with-punctuation", "heading", "heading-1"}
    assert _links("[ref]: docs/testing.md#a-first-test\n") == [("docs/testing.md", "a-first-test")]


# ------------------------------------------------------------------ the pytest options excerpt

def test_the_kinesim_args_excerpt_reaches_the_server(tmp_path):
    """docs/testing.md's pyproject.toml excerpt, in a project of its own: the plugin starts the server
    with those arguments."""
    excerpt = next(b.code for b in blocks() if b.name == "Options #1")
    assert tomllib.loads(excerpt)["tool"]["pytest"]["ini_options"]["kinesim_args"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "excerpt"\nversion = "0.1.0"\n\n' + excerpt)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_args.py").write_text(textwrap.dedent("""\
        def test_args(kinesim):
            args = kinesim.process.args
            assert args[args.index("--firehose-interval-scale") + 1] == "0.01", args
        """))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AWS_"))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
