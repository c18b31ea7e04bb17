"""The fuzz sweep of tests/test_fuzz.py for CloudFormation, STS, SSM, ECR and IAM (template bombs,
backtracking AllowedPattern, hostile policies and form keys among them): a file of its own so
that the test processes run it beside the data services' half."""
from __future__ import annotations

import pytest

from fuzz_sweep import CONTROL_SERVICES, start_fuzz_server, sweep


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    proc = start_fuzz_server(tmp_path_factory)
    yield proc
    proc.stop()


def test_every_operation_answers_fuzzed_requests_without_5xx(fuzz_server):
    sweep(fuzz_server, CONTROL_SERVICES)
