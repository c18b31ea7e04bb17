"""The engine's errors, in a module of their own so that the template's readers and checkers
(template_reader, template_quotas) and template.py, which uses them, import no one another."""
from __future__ import annotations


class DeployError(Exception):
    """A deploy that cannot go on; the message says what to fix."""


class TemplateError(DeployError):
    """The template itself is wrong (CloudFormation would reject it before touching anything)."""
