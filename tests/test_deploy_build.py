"""`kinesim deploy`'s build step (what `sam build` does): requirements.txt and package.json
dependencies installed into the packages deployed, cached by content, skipped by --no-build and
for code sam build already built. Real pip and npm, real registries, a real server."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from kinesim.deploy import cli
from kinesim.deploy.stack import stack_name_for
from kinesim.functions import runtimes

from conftest import client_for

SAME_PYTHON = "python%d.%d" % sys.version_info[:2]  # the interpreter running pip: a plain install
OTHER_PYTHON = "python3.13" if sys.version_info[:2] != (3, 13) else "python3.12"  # wheels for another Python
OTHER_TAG = "cpython-%s" % OTHER_PYTHON.removeprefix("python").replace(".", "")

HANDLER = """\
import os
import markupsafe
import six
import helpers

def handler(event, context):
    here = os.path.dirname(markupsafe.__file__)
    return {"six": six.__version__, "escaped": str(markupsafe.escape("<b>")), "helper": helpers.NAME,
            "speedups": sorted(f for f in os.listdir(here) if f.startswith("_speedups.") and f.endswith(".so"))}
"""
SAME_HANDLER = """\
from markupsafe import _speedups  # the compiled extension: its wheel is for this very interpreter

def handler(event, context):
    return {"speedups": os.path.basename(_speedups.__file__)}

import os
"""
NODE_HANDLER = """\
const ms = require("ms");
exports.handler = async () => ({ minute: ms(60000), devDependencyPresent: (() => {
  try { require.resolve("is-number"); return true; } catch (e) { return false; }
})() });
"""


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    """pip and npm reach their registries (the packages these tests install), else skip."""
    scratch = tmp_path_factory.mktemp("registries")
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                          "--python-version", OTHER_PYTHON.removeprefix("python"), "--implementation", "cp",
                          "--platform", "manylinux2014_x86_64", "-d", str(scratch), "six==1.17.0",
                          "markupsafe==3.0.2"], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"PyPI is unreachable from pip here: {pip.stderr.strip()[-400:]}")
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    view = subprocess.run([npm, "view", "ms@2.1.3", "version"], capture_output=True, text=True, timeout=300)
    if view.returncode != 0:
        pytest.skip(f"the npm registry is unreachable: {view.stderr.strip()[-400:]}")
    runtimes.install(24, quiet=True)  # nodejs24.x's Node.js, into the node cache the server looks in


@pytest.fixture
def cache(tmp_path_factory, monkeypatch):
    """One build cache for the module's tests (XDG_CACHE_HOME), kept out of the user's."""
    root = tmp_path_factory.getbasetemp() / "build-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(root))
    return root / "kinesim" / "build"


@pytest.fixture
def lam(server):
    return client_for(server.url, "lambda")


def deploy(capsys, url: str, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--endpoint-url", url, "--no-lint"])
    out, err = capsys.readouterr()
    return code, out, err


def invoke(lam, name: str) -> dict:
    response = lam.invoke(FunctionName=name, Payload=b"{}")
    payload = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, payload
    return payload


def package_names(lam, name: str) -> set[str]:
    location = lam.get_function(FunctionName=name)["Code"]["Location"]
    with urllib.request.urlopen(location, timeout=60) as response:
        return set(zipfile.ZipFile(io.BytesIO(response.read())).namelist())


def write_project(root: Path, suffix: str) -> Path:
    (root / "py").mkdir()
    (root / "py" / "app.py").write_text(HANDLER)
    (root / "py" / "requirements.txt").write_text("# the function's own\nmarkupsafe==3.0.2\n")
    (root / "same").mkdir()
    (root / "same" / "app.py").write_text(SAME_HANDLER)
    (root / "same" / "requirements.txt").write_text("markupsafe==3.0.2\n")
    (root / "layer").mkdir()
    (root / "layer" / "requirements.txt").write_text("six==1.17.0\n")
    (root / "layer" / "helpers.py").write_text("NAME = 'from the layer'\n")
    (root / "node").mkdir()
    (root / "node" / "index.js").write_text(NODE_HANDLER)
    (root / "node" / "package.json").write_text(json.dumps({
        "name": "fn", "version": "1.0.0", "dependencies": {"ms": "2.1.3"},
        "devDependencies": {"is-number": "7.0.0"}}))
    (root / "plain").mkdir()
    (root / "plain" / "app.py").write_text("def handler(event, context):\n    return 'plain'\n")
    template = root / "template.yaml"
    template.write_text(f"""
Transform: AWS::Serverless-2016-10-31
Globals:
  Function: {{Timeout: 30}}
Resources:
  Deps:
    Type: AWS::Serverless::LayerVersion
    Properties: {{LayerName: deps-{suffix}, ContentUri: layer/, CompatibleRuntimes: [{OTHER_PYTHON}]}}
    Metadata: {{BuildMethod: {OTHER_PYTHON}}}
  PyFunction:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: py-{suffix}
      CodeUri: py/
      Handler: app.handler
      Runtime: {OTHER_PYTHON}
      Layers: [!Ref Deps]
  SameFunction:
    Type: AWS::Serverless::Function
    Properties: {{FunctionName: same-{suffix}, CodeUri: same/, Handler: app.handler, Runtime: {SAME_PYTHON}}}
  NodeFunction:
    Type: AWS::Serverless::Function
    Properties: {{FunctionName: node-{suffix}, CodeUri: node/, Handler: index.handler, Runtime: nodejs24.x}}
  PlainFunction:
    Type: AWS::Serverless::Function
    Properties: {{FunctionName: plain-{suffix}, CodeUri: plain/, Handler: app.handler, Runtime: {SAME_PYTHON}}}
""")
    return template


def building_lines(out: str) -> dict[str, str]:
    """What each `Building ... of LogicalId for ...` line ended with."""
    lines = {}
    for line in out.splitlines():
        if line.startswith("Building "):
            lid = line.split(" of ", 1)[1].split(" ", 1)[0]
            lines[lid] = line.split(" ... ", 1)[1]
    return lines


def test_functions_and_layer_build_run_and_redeploy_from_cache(server, lam, registries, cache, tmp_path, capsys):
    suffix = uuid.uuid4().hex[:8]
    template = write_project(tmp_path, suffix)
    code, out, err = deploy(capsys, server.url, str(template), "--stack-name", f"build-{suffix}")
    assert code == 0, err
    built = building_lines(out)
    # One line per built function or layer; code without dependencies is not built at all.
    assert set(built) == {"Deps", "PyFunction", "SameFunction", "NodeFunction"}, out
    assert all(line.startswith("installed in ") for line in built.values()), out
    assert f"Building CodeUri py/ of PyFunction for {OTHER_PYTHON} (x86_64) ... installed in" in out

    # Wheels for the function's Python (not the interpreter that ran pip), the layer under python/.
    result = invoke(lam, f"py-{suffix}")
    assert result["six"] == "1.17.0" and result["escaped"] == "&lt;b&gt;" and result["helper"] == "from the layer"
    assert result["speedups"] == [f"_speedups.{OTHER_TAG}-x86_64-linux-gnu.so"]
    names = package_names(lam, f"py-{suffix}")
    assert {"app.py", "requirements.txt", "markupsafe/__init__.py"} <= names and not any("six" in n for n in names)
    # (six and helpers came from the layer: its package has them under python/, on the path as /opt/python.)
    # Same Python as pip's: the compiled extension loads.
    assert invoke(lam, f"same-{suffix}")["speedups"].startswith("_speedups.cpython-%d%d" % sys.version_info[:2])
    # npm: production dependencies only.
    assert invoke(lam, f"node-{suffix}") == {"minute": "1m", "devDependencyPresent": False}
    node_names = package_names(lam, f"node-{suffix}")
    assert {"index.js", "package.json", "node_modules/ms/index.js"} <= node_names
    assert not any(n.startswith("node_modules/is-number") for n in node_names)
    assert invoke(lam, f"plain-{suffix}") == "plain"

    # Unchanged: every package comes from the cache, no pip or npm run, nothing to update.
    dependencies = sorted((cache / "dependencies").iterdir())
    installed_at = {d.name: d.stat().st_ino for d in dependencies}
    code, out, err = deploy(capsys, server.url, str(template), "--stack-name", f"build-{suffix}")
    assert code == 0, err
    assert building_lines(out) == {"Deps": "cached", "PyFunction": "cached", "SameFunction": "cached",
                                   "NodeFunction": "cached"}, out
    assert all(line.split()[0] in ("unchanged", "ignored") for line in out.splitlines() if " AWS::" in line), out
    assert {d.name: d.stat().st_ino for d in sorted((cache / "dependencies").iterdir())} == installed_at

    # A handler edited: repackaged with the installed dependencies, not installed again.
    (tmp_path / "node" / "index.js").write_text(NODE_HANDLER.replace("60000", "120000"))
    code, out, err = deploy(capsys, server.url, str(template), "--stack-name", f"build-{suffix}")
    assert code == 0, err
    assert building_lines(out)["NodeFunction"].startswith("dependencies cached, packaged in "), out
    assert building_lines(out)["PyFunction"] == "cached"
    assert invoke(lam, f"node-{suffix}")["minute"] == "2m"


def test_no_build_deploys_the_directory_as_it_is(server, lam, registries, cache, tmp_path, capsys):
    suffix = uuid.uuid4().hex[:8]
    template = write_project(tmp_path, suffix)
    code, out, err = deploy(capsys, server.url, str(template), "--stack-name", f"raw-{suffix}", "--no-build")
    assert code == 0, err
    assert "Building" not in out
    response = lam.invoke(FunctionName=f"same-{suffix}", Payload=b"{}")
    assert response.get("FunctionError") == "Unhandled"
    error = json.loads(response["Payload"].read())
    assert error["errorType"] == "Runtime.ImportModuleError"
    assert "No module named 'markupsafe'" in error["errorMessage"]
    response = lam.invoke(FunctionName=f"node-{suffix}", Payload=b"{}")
    assert json.loads(response["Payload"].read())["errorType"] == "Runtime.ImportModuleError"


def test_failed_build_changes_nothing(server, lam, registries, cache, tmp_path, capsys):
    suffix = uuid.uuid4().hex[:8]
    template = write_project(tmp_path, suffix)
    (tmp_path / "same" / "requirements.txt").write_text("markupsafe==3.0.2\nkinesim-no-such-package-zz==1.0\n")
    code, out, err = deploy(capsys, server.url, str(template), "--stack-name", f"fail-{suffix}")
    assert code == 1
    assert "Building CodeUri same/ of SameFunction" in out and "... failed" in out
    assert "building CodeUri same/ of SameFunction" in err and "nothing was deployed" in err
    assert "kinesim-no-such-package-zz" in err and "--no-build" in err
    for name in (f"py-{suffix}", f"same-{suffix}", f"plain-{suffix}"):
        with pytest.raises(ClientError) as caught:
            lam.get_function(FunctionName=name)
        assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{server.url}/_kinesim/stacks/fail-{suffix}")


def test_a_template_built_by_sam_build_deploys_as_it_is(server, lam, cache, tmp_path, capsys, monkeypatch):
    """sam build's layout (.aws-sam/build/template.yaml, CodeUri relative to it, dependencies
    installed next to the handler), made by hand: `kinesim deploy` without a template picks it,
    as `sam deploy` does, and builds nothing again."""
    suffix = uuid.uuid4().hex[:8]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import vendored\ndef handler(e, c):\n    return vendored.WHO\n")
    (tmp_path / "src" / "requirements.txt").write_text("kinesim-no-such-package-zz==1.0\n")  # a build would fail
    (tmp_path / "template.yaml").write_text(f"""
Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties: {{FunctionName: sam-{suffix}, CodeUri: src/, Handler: app.handler, Runtime: {SAME_PYTHON}}}
""")
    build = tmp_path / ".aws-sam" / "build"
    shutil.copytree(tmp_path / "src", build / "Fn")
    (build / "Fn" / "vendored.py").write_text("WHO = 'installed by sam build'\n")
    (build / "template.yaml").write_text((tmp_path / "template.yaml").read_text().replace("CodeUri: src/",
                                                                                          "CodeUri: Fn"))
    monkeypatch.chdir(tmp_path)
    code, out, err = deploy(capsys, server.url)
    assert code == 0, err
    assert "Building" not in out
    assert invoke(lam, f"sam-{suffix}") == "installed by sam build"
    # The stack is the project's (named after its directory, not after .aws-sam/build).
    project_stack = stack_name_for(tmp_path / "template.yaml")
    with urllib.request.urlopen(f"{server.url}/_kinesim/stacks/{project_stack}") as response:
        assert json.loads(response.read())["StackStatus"] == "CREATE_COMPLETE"
    # Named explicitly, the project's template is deployed as named (sam deploy --template-file):
    # built here, which fails for this requirements.txt, and says where sam build's output is.
    code, out, err = deploy(capsys, server.url, "template.yaml")
    assert code == 1
    assert ".aws-sam/build/template.yaml" in out and "kinesim-no-such-package-zz" in err
    code, out, err = deploy(capsys, server.url, "--delete")
    assert code == 0, err
    assert f"Stack {project_stack} deleted" in out
