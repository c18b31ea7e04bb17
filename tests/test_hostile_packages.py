"""Hostile deployment packages through the Lambda API against a real server: links, names and trees
built to write outside the code directory or to crash the unpacking must get AWS's answer to a
package it cannot unzip, and leave every file outside untouched; packages with internal links work."""
from __future__ import annotations

import io
import json
import os
import stat
import uuid
import warnings
import zipfile

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

ROLE = "arn:aws:iam::000000000000:role/lambda-role"
NOT_A_ZIP = ("InvalidParameterValueException",
             "Could not unzip uploaded file. Please check your file, then try to upload again.", 400)
HANDLER = "def handler(event, context):\n    return 'ok'\n"
SENTINEL = b"sentinel: must never change\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A private directory holding the server's data dir, so whatever lands next to it is ours to see."""
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def server(base, tmp_path_factory):
    proc = start_server(tmp_path_factory, data_dir=str(base / "data"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def lambda_client(server):
    lam = client_for(server.url, "lambda")
    # Lambda made before any sentinel is placed: starting, it removes the directories of functions
    # it does not have, which the sentinels' would be.
    lam.list_functions()
    return lam


@pytest.fixture
def function_name():
    return "hostile-" + uuid.uuid4().hex[:10]


@pytest.fixture
def sentinels(base, server, function_name):
    """A file `X` at every level an escape could aim at: next to the data dir, in it, next to the
    functions' directories and in this function's own directory (next to its packages)."""
    home = base / "data" / "functions" / function_name
    home.mkdir(parents=True, exist_ok=True)
    places = [base, base / "data", base / "data" / "functions", home]
    for place in places:
        (place / "X").write_bytes(SENTINEL)
    return [place / "X" for place in places]


def entry(name: str, data: str | bytes = b"", link: bool = False, mode: int = 0o644) -> tuple:
    return name, data, link, mode


def build(*entries: tuple) -> bytes:
    """A zip holding exactly these entries, in this order, duplicates included (zipfile warns)."""
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as z:
        warnings.simplefilter("ignore")  # "Duplicate name": the duplicates are the point
        for name, data, link, mode in entries:
            info = zipfile.ZipInfo("placeholder", date_time=(2020, 1, 1, 0, 0, 0))
            info.filename = name  # set afterwards: ZipInfo() would cut the name at a NUL byte
            info.create_system = 3  # Unix: the mode bits below are meant
            info.external_attr = ((stat.S_IFLNK | 0o777) if link else (stat.S_IFREG | mode)) << 16
            if name.endswith("/"):
                info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
            z.writestr(info, data)
    return buf.getvalue()


def tree(base) -> dict[str, tuple]:
    """Every path under `base` with its kind and content, but the server's own database and logs."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = os.path.relpath(dirpath, base)
        if rel_dir == "data":
            dirnames[:] = [d for d in dirnames if d != "logs"]
        for name in dirnames + filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel.startswith(os.path.join("data", "kinesim.db")):
                continue
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as f:
                    seen[rel] = ("file", f.read(), info.st_mtime_ns)
            else:
                seen[rel] = ("dir",)
    return seen


def assert_refused(lambda_client, base, function_name, sentinels, package: bytes) -> None:
    before = tree(base)
    with pytest.raises(ClientError) as e:
        lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE,
                                      Handler="app.handler", Code={"ZipFile": package})
    err = e.value.response
    assert (err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]) == NOT_A_ZIP
    for sentinel in sentinels:
        assert sentinel.read_bytes() == SENTINEL, f"{sentinel} was overwritten"
    # Nothing appeared or changed anywhere: no escaped file, no half-unpacked temporary directory.
    assert tree(base) == before
    with pytest.raises(ClientError):
        lambda_client.get_function(FunctionName=function_name)


def test_the_reported_link_chain_cannot_escape(lambda_client, base, function_name, sentinels):
    # f -> b1/b2/b3/b4/../../../../X, each bN -> "." (harmless when f was checked), then f written
    # through: X four levels above the unpacking directory, the data dir's parent.
    package = build(entry("app.py", HANDLER), entry("f", "b1/b2/b3/b4/../../../../X", link=True),
                    *(entry(f"b{i}", ".", link=True) for i in range(1, 5)), entry("f", "pwned"))
    assert_refused(lambda_client, base, function_name, sentinels, package)


def test_the_link_chain_is_refused_even_without_a_write_through_it(lambda_client, base, function_name, sentinels):
    package = build(entry("app.py", HANDLER), entry("f", "b1/b2/../../X", link=True),
                    entry("b1", ".", link=True), entry("b2", ".", link=True))
    assert_refused(lambda_client, base, function_name, sentinels, package)


HOSTILE = {
    "absolute link target": lambda base: [entry("x", str(base / "X"), link=True), entry("x", "pwned")],
    "absolute link alone": lambda base: [entry("passwd", "/etc/passwd", link=True)],
    "link to ..": lambda base: [entry("up", "..", link=True), entry("up/X", "pwned")],
    "link to .. alone": lambda base: [entry("up", "..", link=True)],
    "link up four levels, written through": lambda base: [entry("up", "../../../..", link=True),
                                                          entry("up/X", "pwned")],
    "directory entry over a link": lambda base: [entry("d", "../../..", link=True), entry("d/"),
                                                 entry("d/X", "pwned")],
    "file then a link of the same name": lambda base: [entry("X", "harmless"), entry("X", "../X", link=True)],
    "a write through an inside link": lambda base: [entry("sub/"), entry("l", "sub", link=True),
                                                    entry("l/app.py", "pwned")],
    "link to a link leading out": lambda base: [entry("a", "b/X", link=True), entry("b", "../..", link=True)],
    "link through a link then ..": lambda base: [entry("deep/d1/d2/"), entry("s", "deep/d1/d2", link=True),
                                                 entry("t", "s/../../../../X", link=True)],
    "link loop": lambda base: [entry("a", "b", link=True), entry("b", "a", link=True)],
    "link to itself": lambda base: [entry("a", "a/x", link=True)],
    "empty link target": lambda base: [entry("a", "", link=True)],
    "NUL in a link target": lambda base: [entry("a", "app.py\0../../X", link=True)],
    "NUL in a name": lambda base: [entry("x\0/../../../X", "pwned")],
    "a link named .": lambda base: [entry(".", "..", link=True)],
    "a file named .": lambda base: [entry("./.", "pwned")],
    "dot-dot name": lambda base: [entry("./../X", "pwned")],
    "backslash dot-dot name": lambda base: [entry("a\\..\\..\\X", "pwned")],
    "file under a file": lambda base: [entry("a", "x"), entry("a/b", "y")],
    "file over a directory": lambda base: [entry("a/b", "y"), entry("a", "x")],
    # Small packages asking for what no real one needs: 300,000+ directories, megabytes of links.
    "directory bomb": lambda base: [entry(f"{i}/" + "d/" * 254 + "f") for i in range(1200)],
    "link bytes bomb": lambda base: [entry(f"l{i}", "x/" * 2047, link=True) for i in range(1030)],
}


@pytest.mark.parametrize("attack", list(HOSTILE))
def test_hostile_package_is_refused(lambda_client, base, function_name, sentinels, attack):
    package = build(entry("app.py", HANDLER), *HOSTILE[attack](base))
    assert_refused(lambda_client, base, function_name, sentinels, package)


@pytest.mark.parametrize("name", [
    "a" * 256 + ".py",                   # one component over NAME_MAX
    "/".join(["d" * 250] * 20) + "/f",   # every component fits, the whole path is over PATH_MAX
    "d/" * 300 + "f",                    # nesting deeper than any package needs
    "d/" * 2040 + "f",                   # as deep as PATH_MAX lets one-letter directories go
])
def test_unwritable_names_are_refused(lambda_client, base, function_name, sentinels, name):
    package = build(entry("app.py", HANDLER), entry("ok/fine.py", "x = 1"), entry(name, "x"))
    assert_refused(lambda_client, base, function_name, sentinels, package)
    # The server is unharmed: the same function is created from a good package afterwards.
    lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                  Code={"ZipFile": build(entry("app.py", HANDLER))})
    assert lambda_client.invoke(FunctionName=function_name)["Payload"].read() == b'"ok"'
    lambda_client.delete_function(FunctionName=function_name)


LINKED_HANDLER = """
import os

HERE = os.path.dirname(os.path.abspath(__file__))

def handler(event, context):
    from helpers import greet  # helpers/ is a link to src/helpers
    with open(os.path.join(HERE, "node_modules", ".bin", "cli")) as bin_cli, \\
            open(os.path.join(HERE, "node_modules", ".bin", "tool")) as bin_tool:
        return {"greet": greet(), "cli": bin_cli.read(), "tool": bin_tool.read(),
                "links": sorted(p for p in ("app.py", "helpers", "node_modules/.bin/cli", "node_modules/.bin/tool",
                                            "node_modules/tool") if os.path.islink(os.path.join(HERE, p)))}
"""


def test_internal_links_still_work(lambda_client, base, function_name, sentinels):
    # The layouts real packages have: npm's node_modules/.bin links, pnpm's node_modules/<pkg> links
    # into .pnpm (and a .bin link through one), a module linked in from elsewhere in the package.
    package = build(
        entry("src/handler.py", LINKED_HANDLER), entry("app.py", "src/handler.py", link=True),
        entry("src/helpers/__init__.py", "def greet():\n    return 'hi'\n"),
        entry("helpers", "src/helpers", link=True),
        entry("node_modules/.bin/cli", "../pkg/cli.js", link=True),
        entry("node_modules/pkg/cli.js", "#!/usr/bin/env node\n", mode=0o755),
        entry("node_modules/.bin/tool", "../tool/bin.js", link=True),
        entry("node_modules/tool", ".pnpm/tool@1.0.0/node_modules/tool", link=True),
        entry("node_modules/.pnpm/tool@1.0.0/node_modules/tool/bin.js", "tool"))
    outside = sentinels[:-1]  # the last is in the function's own directory, which deleting it removes
    before = {str(s): s.read_bytes() for s in outside}
    lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                  Code={"ZipFile": package})
    try:
        out = lambda_client.invoke(FunctionName=function_name)
        assert "FunctionError" not in out, out["Payload"].read()
        assert json.loads(out["Payload"].read()) == {
            "greet": "hi", "cli": "#!/usr/bin/env node\n", "tool": "tool",
            "links": ["app.py", "helpers", "node_modules/.bin/cli", "node_modules/.bin/tool", "node_modules/tool"]}
    finally:
        lambda_client.delete_function(FunctionName=function_name)
    assert {str(s): s.read_bytes() for s in outside} == before


def test_windows_separators_unpack(lambda_client, function_name):
    # Some Windows tools write `\` between names, directory entries included ("pkg\").
    package = build(entry("pkg\\"), entry("pkg\\__init__.py", ""),
                    entry("pkg\\mod.py", "def handler(event, context):\n    return 'windows'\n"))
    lambda_client.create_function(FunctionName=function_name, Runtime="python3.12", Role=ROLE,
                                  Handler="pkg/mod.handler", Code={"ZipFile": package})
    try:
        assert lambda_client.invoke(FunctionName=function_name)["Payload"].read() == b'"windows"'
    finally:
        lambda_client.delete_function(FunctionName=function_name)
