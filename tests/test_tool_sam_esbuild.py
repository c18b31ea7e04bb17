"""The SAM CLI, unchanged, building a TypeScript function with `Metadata: BuildMethod: esbuild`
(tests/templates/typescript-esbuild) and deploying it to kinesim: `sam build` with esbuild from the
project's own `npm install` on the PATH (sam build runs an esbuild it finds on the PATH or among the
function's production dependencies), `sam deploy`, an invoke. kinesim deploy's own build of the
same project (kinesim/deploy/build_esbuild.py) makes the same bundle and the same template changes."""
from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from conftest import client_for
from kinesim.deploy.build import Builder
from kinesim.deploy.template import load_template
from npm_setup import NPM
from tool_setup import REGION, run_tool, sam_cli, tool_env

APP = Path(__file__).parent / "templates" / "typescript-esbuild"

# A first run installs the SAM CLI (~1-2 min, shared with test_tool_sam.py); then ~30 s.
pytestmark = pytest.mark.timeout(1500)


def test_sam_build_and_deploy_of_an_esbuild_function(tool_server, tmp_path):
    if not NPM:
        pytest.skip("npm is not on the PATH")
    sam = sam_cli()
    app = tmp_path / "app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("node_modules", ".aws-sam"))
    project = app / "greeter"
    # The user's set-up: the project's dependencies (esbuild among the devDependencies) installed,
    # its node_modules/.bin on the PATH as `npm run` / `npx` put it there.
    path = os.pathsep.join([str(project / "node_modules" / ".bin"), str(Path(sys.executable).parent),
                            os.environ.get("PATH", "")])
    env = tool_env(tool_server.url, tmp_path / "home", PATH=path, SAM_CLI_POLL_DELAY="0.5")
    run_tool([NPM, "install", "--no-audit", "--no-fund"], env, cwd=project, timeout=300)

    run_tool([sam, "build"], env, cwd=app, timeout=300)
    built = app / ".aws-sam" / "build"
    assert sorted(os.listdir(built / "Greeter")) == ["greet.js", "greet.js.map"]
    greeter = load_template(built / "template.yaml")["Resources"]["Greeter"]
    assert greeter["Properties"]["Handler"] == "greet.handler"
    assert greeter["Properties"]["Environment"] == {"Variables": {"NODE_OPTIONS": " --enable-source-maps"}}

    # kinesim deploy's build of the same project: the same files, bundle and template changes.
    ours = Builder(tmp_path / "kinesim-build", write=lambda text: None).build_template(
        load_template(app / "template.yaml"), app, {}, REGION)["Resources"]["Greeter"]
    with zipfile.ZipFile(ours["Properties"]["CodeUri"]) as package:
        assert sorted(package.namelist()) == ["greet.js", "greet.js.map"]
        assert package.read("greet.js") == (built / "Greeter" / "greet.js").read_bytes()
    assert {k: v for k, v in ours["Properties"].items() if k != "CodeUri"} == \
        {k: v for k, v in greeter["Properties"].items() if k != "CodeUri"}

    name = "sam-ts-" + uuid.uuid4().hex[:8]
    deploy = [sam, "deploy", "--resolve-s3", "--stack-name", name, "--no-confirm-changeset",
              "--capabilities", "CAPABILITY_IAM", "--region", REGION, "--no-progressbar",
              "--parameter-overrides", f"FunctionName={name}"]
    out = run_tool(deploy, env, cwd=app, timeout=300).stdout
    assert "Successfully created/updated stack" in out, out
    lam, sts = client_for(tool_server.url, "lambda"), client_for(tool_server.url, "sts")
    assert lam.get_function_configuration(FunctionName=name)["Handler"] == "greet.handler"
    response = lam.invoke(FunctionName=name, Payload=json.dumps({"name": "sam"}).encode())
    result = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, result
    assert result == {"message": "HELLO, SAM!", "minute": "1m", "account": sts.get_caller_identity()["Account"]}
