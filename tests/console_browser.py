"""The web console's browser tests' harness: Playwright driving Debian's Chromium (tests/chromium_setup.py
finds or installs it; Playwright's own browser downloads are never used), pages of the console opened
in a fresh browser context each, waits on conditions (Playwright's auto-retrying `expect` with generous
timeouts, never sleeps), full-page screenshots kept as test artefacts, and a page of a foreign origin
for the security tests.

Use it from a test module:

    from console_browser import Console, console_browser_fixture  # noqa: F401 (the console_browser fixture)

    def test_x(console_browser, server):
        console = Console(console_browser, server.url)
        with console.open("/streams/s") as page:
            expect(page.locator("#shards tr")).to_have_count(2)
            console.shot(page, "stream")

Screenshots go to $KINESIM_TEST_ARTIFACTS/console/ when that is set, else test-artifacts/console/ at
the repository's root (git-ignored); a page whose test fails is saved there as `FAILED-<name>.png`."""
from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from chromium_setup import chromium

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "/_kinesim/console"
# Generous: two cores shared with a server, its functions' workers and other tests. `expect` retries
# until then, so a passing check costs only as long as the page takes.
WAIT_MS = 45_000
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1360, "height": 900}


def artifacts_dir() -> Path:
    base = os.environ.get("KINESIM_TEST_ARTIFACTS")
    path = (Path(base) if base else ROOT / "test-artifacts") / "console"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module", name="console_browser")
def console_browser_fixture():
    """A headless Chromium (Debian's) under Playwright, for the module's tests; skipped with the
    reason when Playwright is missing or cannot start it."""
    executable = chromium()
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as err:
        pytest.skip(f"Python playwright is needed for the console's browser tests (pip install playwright): {err}")
    try:
        playwright = sync_playwright().start()
    except Exception as err:  # its driver (a node program shipped in the wheel) does not run here
        pytest.skip(f"Playwright's driver does not start: {str(err).strip()[:800]}")
    try:
        browser = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
    except Exception as err:  # Playwright's Error: a browser it cannot drive, a missing library
        playwright.stop()
        pytest.skip(f"Playwright cannot start {executable}: {str(err).strip()[:800]}")
    expect.set_options(timeout=WAIT_MS)
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()


class Console:
    """The console of the kinesim server at `url`, opened in `browser`."""

    def __init__(self, browser, url: str) -> None:
        self.browser = browser
        self.url = url.rstrip("/")

    def href(self, path: str) -> str:
        return self.url + PREFIX + path

    @contextmanager
    def open(self, path: str = "/", name: str | None = None) -> Iterator:
        """The console page at `path` (e.g. "/streams/s"), in a context of its own, once its first
        answer has come (the header's badge says "live"). Fails the test when the page throws an
        uncaught error; a page whose test fails is screenshot as FAILED-<name>."""
        context = self.browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        failed = artifacts_dir() / ("FAILED-" + (name or re.sub(r"[^A-Za-z0-9._-]+", "_", path).strip("_") or "overview")
                                    + ".png")
        try:
            page.goto(self.href(path))
            live(page)
            yield page
            assert not errors, f"the page {path} threw: {errors}"
            failed.unlink(missing_ok=True)  # an earlier run's
        except BaseException:
            try:
                page.screenshot(path=str(failed), full_page=True)
            except Exception:  # the page may be what broke; the test's own error is what matters
                pass
            raise
        finally:
            context.close()

    @staticmethod
    def shot(page, name: str) -> Path:
        """A full-page PNG of `page` as an artefact named `name`.png."""
        path = artifacts_dir() / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    @staticmethod
    def shot_of(locator, name: str) -> Path:
        """A PNG of one part of a page (a chart, say) as an artefact named `name`.png."""
        path = artifacts_dir() / f"{name}.png"
        locator.screenshot(path=str(path))
        return path


def live(page) -> None:
    """Wait until the page's polls are answered: the header's badge turns "live"."""
    from playwright.sync_api import expect
    expect(page.locator("#live")).to_have_class(re.compile(r"\bok\b"))


def set_field(page, selector: str, value: str) -> None:
    """Fill an input or textarea, or choose an option of a select, whichever `selector` is."""
    field = page.locator(selector)
    if field.evaluate("(node) => node.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)


class _OnePage(BaseHTTPRequestHandler):
    """Answers every GET with its server's `page`."""

    def do_GET(self):
        body = self.server.page
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serving(page: bytes, address: str) -> Iterator[str]:
    """The origin http://<address>:<port> of a web site serving `page` at every path."""
    httpd = ThreadingHTTPServer((address, 0), _OnePage)
    httpd.page = page
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def foreign_origin() -> Iterator[str]:
    """The origin of another web site (http://127.0.0.2:<port>: not one of this machine's origins to
    kinesim's guard), serving a blank page at "/"."""
    with serving(b"<!doctype html><title>another site</title><p>another site</p>", "127.0.0.2") as origin:
        yield origin
