"""The SAM transform (`Transform: AWS::Serverless-2016-10-31`), applied with aws-sam-translator,
on the server as CloudFormation applies it.

The translator is the one CloudFormation runs, so `AWS::Serverless::Function` with its `Events`
becomes exactly the `AWS::Lambda::Function`, `AWS::IAM::Role` and
`AWS::Lambda::EventSourceMapping` resources AWS would create. Managed policy names are looked up
in the map the translator ships, never in IAM: nothing here leaves the machine. Code is in S3 by
the time a template gets here (`sam deploy`, `aws cloudformation package` and `kinesim deploy`
upload it; package.py).
"""
from __future__ import annotations

import copy
import threading
from typing import Any

import boto3
from samtranslator.internal.managed_policies import get_bundled_managed_policy_map
from samtranslator.metrics.metrics import DummyMetricsPublisher, Metrics
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from kinesim.config import partition_of
from .template import TemplateError

SAM_TRANSFORM = "AWS::Serverless-2016-10-31"
_ONE_AT_A_TIME = threading.Lock()


class BundledManagedPolicyLoader:
    """What samtranslator's ManagedPolicyLoader offers (`load()`: policy name -> ARN), answered
    from the map bundled with the translator instead of IAM's ListPolicies."""

    def __init__(self, partition: str = "aws"):
        self.partition = partition

    def load(self) -> dict[str, str]:
        return dict(get_bundled_managed_policy_map(self.partition) or {})


def transforms(template: dict[str, Any]) -> list[str]:
    declared = template.get("Transform") or []
    return [declared] if isinstance(declared, str) else list(declared)


def is_sam(template: dict[str, Any]) -> bool:
    return SAM_TRANSFORM in transforms(template)


def translate(template: dict[str, Any], region: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The CloudFormation template that `template` stands for: itself when it declares no SAM
    transform, else the translator's output. Code is in S3 by now (the server reads nothing of its
    clients' disks): a local CodeUri is the translator's error, as on AWS."""
    other = [t for t in transforms(template) if t != SAM_TRANSFORM]
    if other:
        raise TemplateError(f"Transform {', '.join(map(str, other))} is not supported by kinesim deploy "
                            f"(only {SAM_TRANSFORM})")
    if not is_sam(template):
        return template
    # The translator records metrics of its own for AWS (to a publisher that drops them here) and,
    # when they are never published, warns "There are unpublished metrics" once per translation,
    # in the server's log. They are published, to nowhere, after each one. One translation at a
    # time: the translator keeps its metrics and the region of its ARNs in globals.
    metrics = Metrics("ServerlessTransform", DummyMetricsPublisher())
    with _ONE_AT_A_TIME:
        translator = Translator(None, Parser(), boto_session=boto3.Session(region_name=region), metrics=metrics)
        try:
            return translator.translate(copy.deepcopy(template), parameter_values=dict(parameters),
                                        get_managed_policy_map=BundledManagedPolicyLoader(partition_of(region)).load)
        except InvalidDocumentException as err:
            raise TemplateError("SAM transform failed: " + "; ".join(c.message for c in err.causes)) from None
        finally:
            metrics.publish()
