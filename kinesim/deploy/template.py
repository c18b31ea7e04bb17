"""Reading a template (YAML or JSON, with CloudFormation's short-form intrinsics) and linting it.

cfn-flip's loader knows `!Ref`, `!GetAtt X.Arn`, `!Sub` and the rest and turns them into their
long `Fn::` forms. cfn-lint checks the template against the CloudFormation resource schemas it
ships (offline), which catches what a local deploy would otherwise silently accept: a misspelt
property, a wrong type, an attribute that `Fn::GetAtt` cannot return.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from cfn_tools import load_json, load_yaml


class DeployError(Exception):
    """A deploy that cannot go on; the message says what to fix."""


class TemplateError(DeployError):
    """The template itself is wrong (CloudFormation would reject it before touching anything)."""


def load_template(path: str | Path) -> dict[str, Any]:
    """The template at `path` as plain dicts and lists, intrinsics in their long `Fn::` form."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TemplateError(f"Cannot read template {path}: {err.strerror}") from None
    try:
        data = load_json(text) if text.lstrip().startswith("{") else load_yaml(text)
    except (ValueError, yaml.YAMLError) as err:
        raise TemplateError(f"Template format error: {path} is not valid YAML or JSON: {err}") from None
    if not isinstance(data, dict):
        raise TemplateError(f"Template format error: {path} must hold a mapping at its top level")
    # ODict -> dict: the template is stored (as JSON) and compared; plain types keep that simple.
    template = json.loads(json.dumps(data, default=str))
    if not isinstance(template.get("Resources"), dict) or not template["Resources"]:
        raise TemplateError("Template format error: At least one Resources member must be defined.")
    return template


def lint(path: str | Path, region: str) -> list[str]:
    """cfn-lint's errors for the template (warnings and informational findings are left out),
    each naming where it is: `resource ClicksStream, property RetentionPeriodHourz (line 13): ...`."""
    from cfnlint.api import ManualArgs, lint as cfn_lint  # heavy import: only when linting

    path = Path(path)
    matches = cfn_lint(path.read_text(encoding="utf-8"), config=ManualArgs(regions=[region]))
    # Several rules can report one mistake in the same words (E1010 and E3024 for a bad
    # attribute in a GetAtt): one line per place and message.
    described = {_describe(m, path.name): m.rule.id for m in matches if m.rule.id.startswith("E")}
    return [f"{text} [cfn-lint {rule}]" for text, rule in described.items()]


def _describe(match: Any, filename: str) -> str:
    where = location(list(getattr(match, "path", None) or []))
    line = f"{filename} line {match.linenumber}"
    return f"{where} ({line}): {match.message}" if where else f"{line}: {match.message}"


def location(path: list[Any]) -> str:
    """A template path such as ['Resources', 'S', 'Properties', 'Tags', 0, 'Key'] in words:
    `resource S, property Tags[0].Key`."""
    if len(path) >= 2 and path[0] in ("Resources", "Outputs", "Parameters", "Conditions", "Mappings"):
        kind = {"Resources": "resource", "Outputs": "output", "Parameters": "parameter",
                "Conditions": "condition", "Mappings": "mapping"}[path[0]]
        where = f"{kind} {path[1]}"
        rest = path[2:]
        if path[0] == "Resources" and rest[:1] == ["Properties"] and len(rest) > 1:
            return f"{where}, property {_dotted(rest[1:])}"
        return f"{where}, {_dotted(rest)}" if rest else where
    return _dotted(path)


def _dotted(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parameter_values(template: dict[str, Any], overrides: dict[str, str]) -> dict[str, Any]:
    """Each parameter's value: the override, else the default, checked against its constraints
    as CloudFormation checks them. Values are strings, as `Ref` returns them (a list for
    `CommaDelimitedList` and `List<...>` types); resource handlers convert to the API's types."""
    declared: dict[str, Any] = template.get("Parameters") or {}
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise TemplateError(f"Parameters: [{', '.join(unknown)}] do not exist in the template")
    missing = [name for name, spec in declared.items() if name not in overrides and "Default" not in spec]
    if missing:
        raise TemplateError(f"Parameters: [{', '.join(missing)}] must have values")
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        raw = overrides[name] if name in overrides else spec["Default"]
        values[name] = _checked_parameter(name, spec, raw)
    return values


def _checked_parameter(name: str, spec: dict[str, Any], raw: Any) -> Any:
    kind = str(spec.get("Type", "String"))
    if kind.startswith("AWS::SSM::Parameter"):
        raise TemplateError(f"Parameter '{name}': type {kind} reads Systems Manager, which kinesim does not "
                            "emulate; declare it as String and pass the value with --parameter-overrides")
    text = ",".join(map(str, raw)) if isinstance(raw, list) else \
        ("true" if raw is True else "false" if raw is False else str(raw))
    items = text.split(",") if kind == "CommaDelimitedList" or kind.startswith("List<") else [text]
    for item in items:
        if "AllowedValues" in spec and item not in [str(v) for v in spec["AllowedValues"]]:
            raise TemplateError(f"Parameter '{name}' must be one of AllowedValues")
        if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], item):
            raise TemplateError(f"Parameter '{name}' must match pattern {spec['AllowedPattern']}")
        if "MinLength" in spec and len(item) < int(spec["MinLength"]):
            raise TemplateError(f"Parameter '{name}' must contain at least {spec['MinLength']} characters")
        if "MaxLength" in spec and len(item) > int(spec["MaxLength"]):
            raise TemplateError(f"Parameter '{name}' cannot be longer than {spec['MaxLength']} characters")
        if kind in ("Number", "List<Number>"):
            try:
                number = float(item)
            except ValueError:
                raise TemplateError(f"Parameter '{name}' must be a number") from None
            if "MinValue" in spec and number < float(spec["MinValue"]):
                raise TemplateError(f"Parameter '{name}' must be a number not less than {spec['MinValue']}")
            if "MaxValue" in spec and number > float(spec["MaxValue"]):
                raise TemplateError(f"Parameter '{name}' must be a number not greater than {spec['MaxValue']}")
    return items if len(items) > 1 or kind == "CommaDelimitedList" or kind.startswith("List<") else items[0]
