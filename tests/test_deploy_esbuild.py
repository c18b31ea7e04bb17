"""`kinesim deploy` of a function with `Metadata: BuildMethod: esbuild`, built as `sam build` builds
it (kinesim/deploy/build_esbuild.py): the BuildProperties -> esbuild arguments mapping (the
expectations are what aws-lambda-builders' EsbuildCommandBuilder makes of the same properties),
where esbuild comes from, the template's Handler and NODE_OPTIONS, and the TypeScript app of
tests/templates/typescript-esbuild deployed to a real server and invoked."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kinesim.deploy import build_esbuild as esbuild
from kinesim.deploy.build import Builder
from kinesim.deploy.build_steps import BuildError
from kinesim.functions import runtimes

from conftest import client_for
from test_deploy_build import building_lines, cache, deploy, package_names  # noqa: F401 (cache: a fixture)

APP = Path(__file__).parent / "templates" / "typescript-esbuild"
OUT = "/OUT"


# BuildProperties -> esbuild's command line


@pytest.fixture
def project(tmp_path):
    for name in ("app.js", "src/app.ts", "src/b.mjs"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path


MANIFEST = {"dependencies": {"ms": "2.1.3", "left-pad": "1.3.0"}, "devDependencies": {"esbuild": "0.28.2"}}


@pytest.mark.parametrize("properties, handler, expected", [
    # Nothing set: the handler's file (.ts first, then .js), sam build's defaults.
    ({}, "app.handler", ["app.js", "--bundle", "--platform=node", f"--outdir={OUT}", "--target=es2020",
                         "--format=cjs", "--minify"]),
    ({}, "src/app.handler", ["src/app.ts", "--bundle", "--platform=node", f"--outdir={OUT}", "--target=es2020",
                             "--format=cjs", "--minify"]),
    # Set ones replace the defaults; false is no flag; several entry points; EntryPoints without an
    # extension get one.
    ({"Minify": False, "Target": "node20", "Format": "esm", "Sourcemap": True, "EntryPoints": ["src/app", "src/b.mjs"]},
     "x.y", ["src/app.ts", "src/b.mjs", "--bundle", "--platform=node", f"--outdir={OUT}", "--target=node20",
             "--format=esm", "--sourcemap"]),
    # Kebab-case flags, lists as name:item, strings as name=value; sam build's own and non-esbuild
    # properties left out.
    ({"External": ["@aws-sdk/*", "pg-native"], "Loader": [".png=dataurl", ".txt=text"], "MainFields": "module,main",
      "OutExtension": [".js=.mjs"], "Banner": ["js=//b"], "Footer": "js=//f", "UseNpmCi": True, "KeepNames": True,
      "SourcesContent": False, "Bundle": False, "Platform": "browser", "Outdir": "x"},
     "app.handler", ["app.js", "--bundle", "--platform=node", f"--outdir={OUT}", "--target=es2020", "--format=cjs",
                     "--minify", "--external:@aws-sdk/*", "--external:pg-native", "--loader:.png=dataurl",
                     "--loader:.txt=text", "--main-fields=module,main", "--out-extension:.js=.mjs", "--banner:js=//b",
                     "--footer=js=//f", "--keep-names"]),
    # ./node_modules/*: every production dependency external instead, first.
    ({"External": ["./node_modules/*", "x"], "Minify": True}, "app.handler",
     ["--external:ms", "--external:left-pad", "app.js", "--bundle", "--platform=node", f"--outdir={OUT}",
      "--target=es2020", "--format=cjs", "--minify"]),
])
def test_build_properties_become_sam_builds_esbuild_arguments(project, properties, handler, expected):
    assert esbuild.arguments(properties, handler, project, OUT, MANIFEST) == expected


@pytest.mark.parametrize("properties, handler, message", [
    ({"EntryPoints": ["src/missing.ts"]}, "app.handler", "entry point src/missing.ts does not exist"),
    ({}, "missing.handler", "entry point missing does not exist (neither missing.ts nor missing.js)"),
    ({"EntryPoints": "src/app.ts"}, "app.handler", "EntryPoints must be a list"),
    ({}, None, "EntryPoints is not set and there is no Handler"),
    ({"LogLimit": 0}, "app.handler", "0 of LogLimit is neither a string, a boolean nor a list"),
])
def test_bad_build_properties_are_named(project, properties, handler, message):
    with pytest.raises(BuildError, match=re.escape(message)):
        esbuild.arguments(properties, handler, project, OUT, MANIFEST)


# The template, as sam build writes .aws-sam/build/template.yaml


def test_handler_points_at_the_bundled_file():
    names = {"greet.js", "greet.js.map", "lib/app.js"}
    assert esbuild.handler_in_package("src/handlers/greet.handler", names) == "greet.handler"
    assert esbuild.handler_in_package("greet.handler", names) == "greet.handler"
    assert esbuild.handler_in_package("lib/app.handler", names) == "lib/app.handler"  # there: unchanged
    assert esbuild.handler_in_package("/opt/nodejs/shared.handler", names) == "/opt/nodejs/shared.handler"


def test_sourcemap_and_node_options():
    # Sourcemap: NODE_OPTIONS gets --enable-source-maps (appended, as sam build joins it).
    resource = {"Properties": {"Handler": "src/app.handler", "Environment": {"Variables": {"NODE_OPTIONS": "--x"}}}}
    esbuild.update_resource(resource, "src/app.handler", {"Sourcemap": True}, "--x", {"app.js"})
    assert resource["Properties"] == {"Handler": "app.handler",
                                      "Environment": {"Variables": {"NODE_OPTIONS": "--x --enable-source-maps"}}}
    resource = {"Properties": {}}
    esbuild.update_resource(resource, "app.handler", {"Sourcemap": True}, None, {"app.js"})
    assert resource["Properties"] == {"Environment": {"Variables": {"NODE_OPTIONS": " --enable-source-maps"}}}
    # Already there (the function's or Globals'), or no Sourcemap: left alone.
    resource = {"Properties": {}}
    esbuild.update_resource(resource, "app.handler", {"Sourcemap": True}, "--enable-source-maps", {"app.js"})
    esbuild.update_resource(resource, "app.handler", {"Sourcemap": False}, None, {"app.js"})
    assert resource == {"Properties": {}}
    # NODE_OPTIONS with --enable-source-maps turns Sourcemap on, unless it is set (false wins).
    assert esbuild.with_source_maps_from_environment({}, "--enable-source-maps") == {"Sourcemap": True}
    assert esbuild.with_source_maps_from_environment({"Sourcemap": False}, "--enable-source-maps") == \
        {"Sourcemap": False}
    assert esbuild.with_source_maps_from_environment({}, "--max-old-space-size=100") == {}


def test_esbuild_only_for_node_functions(tmp_path):
    (tmp_path / "src").mkdir()
    template = {"Resources": {"Fn": {"Type": "AWS::Serverless::Function", "Metadata": {"BuildMethod": "esbuild"},
                                     "Properties": {"CodeUri": "src/", "Handler": "app.handler",
                                                    "Runtime": "python3.12"}}}}
    with pytest.raises(BuildError, match="BuildMethod esbuild bundles Node.js functions, and its Runtime is python3"):
        Builder(tmp_path / "cache", write=lambda text: None).build_template(template, tmp_path, {}, "us-east-1")


# Where esbuild comes from


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_esbuild_is_the_dependencies_then_the_projects_then_the_paths(tmp_path, monkeypatch):
    project, workdir, cache_root = tmp_path / "project", tmp_path / "work", tmp_path / "cache"
    source = project / "functions" / "greeter"
    source.mkdir(parents=True)
    on_path = _executable(tmp_path / "bin" / "esbuild")
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}{os.environ['PATH']}")
    assert esbuild.binary(workdir, source, project, cache_root) == str(on_path)
    in_project = _executable(project / "node_modules" / ".bin" / "esbuild")  # `npm install -D esbuild` at the top
    assert esbuild.binary(workdir, source, project, cache_root) == str(in_project)
    in_function = _executable(source / "node_modules" / ".bin" / "esbuild")
    assert esbuild.binary(workdir, source, project, cache_root) == str(in_function)
    installed = _executable(workdir / "node_modules" / ".bin" / "esbuild")  # a dependency: sam build's first
    assert esbuild.binary(workdir, source, project, cache_root) == str(installed)
    # The cache key follows the one that will run.
    assert esbuild.identity({"dependencies": {"esbuild": "0.28.2"}}, source, project, False) == "dependencies"
    assert esbuild.identity({"devDependencies": {"esbuild": "0.28.2"}}, source, project, False).startswith(
        str(in_function))
    # Above the template's directory is not the project's.
    assert esbuild.binary(tmp_path / "w2", project / "functions", project / "functions", cache_root) == str(on_path)


def test_no_esbuild_anywhere_and_no_registry_says_what_to_do(tmp_path, monkeypatch):
    fake_npm = tmp_path / "bin" / "npm"
    fake_npm.parent.mkdir()
    fake_npm.write_text("#!/bin/sh\necho 'npm error code ENOTFOUND' >&2\nexit 1\n")
    fake_npm.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake_npm.parent))  # no esbuild, an npm without a registry
    source = tmp_path / "src"
    source.mkdir()
    with pytest.raises(BuildError) as caught:
        esbuild.binary(tmp_path / "work", source, tmp_path, tmp_path / "cache")
    message = str(caught.value)
    assert f"installs esbuild {esbuild.ESBUILD_VERSION} from the npm registry into {tmp_path / 'cache'}" in message
    assert "failed (the npm registry is unreachable)" in message and "ENOTFOUND" in message
    assert "`npm install --save-dev esbuild`" in message and "`npm install -g esbuild`" in message
    assert not (tmp_path / "cache" / "esbuild" / esbuild.ESBUILD_VERSION).exists()  # nothing half-made left


# A TypeScript app deployed and invoked


@pytest.fixture(scope="module")
def npm_registry():
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    view = subprocess.run([npm, "view", "ms@2.1.3", "version"], capture_output=True, text=True, timeout=300)
    if view.returncode != 0:
        pytest.skip(f"the npm registry is unreachable: {view.stderr.strip()[-400:]}")
    runtimes.install(24, quiet=True)


def test_typescript_function_is_bundled_deployed_and_runs(server, npm_registry, cache, tmp_path, capsys):
    lam, sts = client_for(server.url, "lambda"), client_for(server.url, "sts")
    app = tmp_path / "app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("node_modules", ".aws-sam"))
    name = "ts-" + uuid.uuid4().hex[:8]
    args = [str(app / "template.yaml"), "--stack-name", name, "--parameter-overrides", f"FunctionName={name}"]
    code, out, err = deploy(capsys, server.url, *args)
    assert code == 0, err
    assert building_lines(out)["Greeter"].startswith("installed, bundled in "), out
    assert "Building CodeUri greeter/ of Greeter for nodejs24.x (x86_64) with esbuild ... " in out

    # esbuild's output alone: the dependency is in the bundle, the AWS SDK is the runtime's.
    assert package_names(lam, name) == {"greet.js", "greet.js.map"}
    config = lam.get_function_configuration(FunctionName=name)
    assert config["Handler"] == "greet.handler"
    assert config["Environment"]["Variables"]["NODE_OPTIONS"].split() == ["--enable-source-maps"]
    response = lam.invoke(FunctionName=name, Payload=json.dumps({"name": "kinesim"}).encode())
    result = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, result
    assert result == {"message": "HELLO, KINESIM!", "minute": "1m",
                      "account": sts.get_caller_identity()["Account"]}
    # The source map is in use: the stack names the TypeScript file.
    response = lam.invoke(FunctionName=name, Payload=b'{"fail": true}')
    error = json.loads(response["Payload"].read())
    assert response.get("FunctionError") == "Unhandled" and error["errorMessage"] == "asked to fail"
    assert any("src/handlers/greet.ts" in line for line in error["trace"]), error

    # Unchanged: from the cache. Edited: bundled again with the installed dependencies.
    code, out, err = deploy(capsys, server.url, *args)
    assert code == 0 and building_lines(out)["Greeter"] == "cached", out + err
    text = app / "greeter" / "src" / "text.ts"
    text.write_text(text.read_text().replace("!`", "?`"))
    code, out, err = deploy(capsys, server.url, *args)
    assert code == 0 and building_lines(out)["Greeter"].startswith("dependencies cached, bundled in "), out + err
    response = lam.invoke(FunctionName=name, Payload=b"{}")
    assert json.loads(response["Payload"].read())["message"] == "HELLO, WORLD?"
