"""The fuzz sweep of tests/test_fuzz.py for CloudFormation, STS, SSM, ECR and IAM (template bombs,
backtracking AllowedPattern, hostile policies and form keys among them): a file of its own so
that the test processes run it beside the data services' half."""
from __future__ import annotations

from fuzz_sweep import CONTROL_SERVICES, fuzz_server, sweep  # noqa: F401 - fuzz_server is a fixture


def test_every_operation_answers_fuzzed_requests_without_5xx(fuzz_server):
    sweep(fuzz_server, CONTROL_SERVICES)
