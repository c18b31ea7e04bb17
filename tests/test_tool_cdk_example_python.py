"""examples/cdk-uploads in Python (app.py, aws-cdk-lib from PyPI in a virtualenv of its own, as
`pip install -r requirements.txt` gives it) through the same CDK CLI: deployed, used, destroyed
with its objects. The TypeScript version, with an update, is test_tool_cdk_example.py."""
from __future__ import annotations

import os
import uuid

import pytest

from cdk_apps import (bootstrapped, cdk_env, cdk_tools, check_destroyed, check_uploads_work,  # noqa: F401
                      example_app)
from conftest import client_for
from tool_setup import cdk_python, outputs_of, run_tool

pytestmark = pytest.mark.timeout(1500)


def test_example_app_in_python(tool_server, cdk_tools, bootstrapped, tmp_path):
    venv = cdk_python()
    app = example_app(tmp_path, cdk_tools)
    stack_name = "cdk-uploads-py-" + uuid.uuid4().hex[:8]
    env = cdk_env(tool_server, cdk_tools, tmp_path / "home", STACK_NAME=stack_name)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"  # python3 is the venv's, as after `activate`
    cli = [cdk_tools.node, cdk_tools.cli, "--app", "python3 app.py"]

    run_tool(cli + ["deploy", "--require-approval", "never", "--no-notices"], env, cwd=app)
    (stack,) = client_for(tool_server.url, "cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    outputs = outputs_of(stack)
    assert outputs["Loud"] == "HELLO!"
    check_uploads_work(tool_server.url, stack_name, outputs, "hello")
    run_tool(cli + ["destroy", "--force", "--no-notices"], env, cwd=app)
    check_destroyed(tool_server.url, stack_name, outputs)
