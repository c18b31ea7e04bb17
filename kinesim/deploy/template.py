"""Reading a template (YAML or JSON, with CloudFormation's short-form intrinsics) and linting it.

cfn-flip's loader knows `!Ref`, `!GetAtt X.Arn`, `!Sub` and the rest and turns them into their
long `Fn::` forms. cfn-lint checks the template against the CloudFormation resource schemas it
ships (offline), which catches what a local deploy would otherwise silently accept: a misspelt
property, a wrong type, an attribute that `Fn::GetAtt` cannot return.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kinesim.protocol import java_regex

from . import template_reader
from .errors import DeployError, TemplateError  # noqa: F401 - DeployError: the engine imports it from here


def load_template(path: str | Path) -> dict[str, Any]:
    """The template at `path` as plain dicts and lists, intrinsics in their long `Fn::` form."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TemplateError(f"Cannot read template {path}: {err.strerror}") from None
    # Aliases resolved, as `aws cloudformation package` and the SAM CLI resolve them in a local file
    # before the service (which refuses them) sees it.
    template = parse_document(text, str(path), aliases=True)
    if not isinstance(template, dict):
        raise TemplateError(f"Template format error: {path} must hold a mapping at its top level")
    if not _top_level_includes(template):  # an included snippet may bring the Resources
        check_resources(template)
    return template


def check_resources(template: dict[str, Any]) -> None:
    if not isinstance(template.get("Resources"), dict) or not template["Resources"]:
        raise TemplateError("Template format error: At least one Resources member must be defined.")


def parse_document(text: str, where: str, aliases: bool = False) -> Any:
    """YAML or JSON text as plain dicts and lists, short-form intrinsics in their long form, nested
    at most template_reader.MAX_DEPTH deep. YAML aliases are refused as the service refuses them,
    unless `aliases` (a local file: resolved within a bound). A text that is not a document raises
    template_reader.NotWellFormed (its `aws_message` is the service's answer)."""
    return template_reader.read(text, where, aliases)


# AWS::Include


INCLUDE = "AWS::Include"
MAX_INCLUDE_DEPTH = 10


def _is_include(value: Any) -> bool:
    return isinstance(value, dict) and value.get("Name") == INCLUDE


def _top_level_includes(template: dict[str, Any]) -> list[dict[str, Any]]:
    declared = template.get("Transform")
    return [t for t in (declared if isinstance(declared, list) else [declared]) if _is_include(t)]


def inline_includes(template: dict[str, Any], base_dir: Path | None,
                    read_s3: Callable[[str, str], bytes] | None = None) -> dict[str, Any]:
    """The template with every `AWS::Include` transform replaced by the snippet it names, as
    CloudFormation does before any other transform (SAM's included): at the top level (a
    `Transform` entry; the snippet's sections are merged into the template's) and anywhere inside
    (`Fn::Transform`: the snippet replaces the value, or is merged into the map that holds it).

    `Location` is an `s3://bucket/key` in kinesim's object store, or a local file as
    `aws cloudformation package` takes it: relative to the including file's directory. Paths
    outside that directory are allowed: like CodeUri, a template is the user's own file, read
    with the user's rights, and monorepos keep shared snippets in a parent directory."""
    includer = _Includer(read_s3)
    declared = template.get("Transform")
    tops = _top_level_includes(template)
    if tops:
        template = {k: v for k, v in template.items() if k != "Transform"}
        rest = [t for t in (declared if isinstance(declared, list) else [declared]) if not _is_include(t)]
        if rest:
            template["Transform"] = rest if isinstance(declared, list) else rest[0]
        for include in tops:
            snippet, where = includer.load(include, base_dir, [])
            if not isinstance(snippet, dict):
                raise TemplateError(f"Transform {INCLUDE}: {where} must hold a mapping of template sections")
            for section, content in snippet.items():
                if isinstance(content, dict) and isinstance(template.get(section), dict):
                    template[section] = {**content, **template[section]}
                else:
                    template.setdefault(section, content)
    template = includer.walk(template, base_dir, [])
    check_resources(template)
    return template


class _Includer:
    def __init__(self, read_s3: Callable[[str, str], bytes] | None):
        self.read_s3 = read_s3

    def walk(self, value: Any, base_dir: Path | None, chain: list[str]) -> Any:
        if isinstance(value, list):
            return [self.walk(v, base_dir, chain) for v in value]
        if not isinstance(value, dict):
            return value
        if "Fn::Transform" in value:
            transform = value["Fn::Transform"]
            if not _is_include(transform):
                name = transform.get("Name") if isinstance(transform, dict) else transform
                raise TemplateError(f"Fn::Transform {name} is not supported by kinesim deploy: it runs a "
                                    f"CloudFormation macro; only {INCLUDE} is inlined")
            snippet, where = self.load(transform, base_dir, chain)
            snippet = self.walk(snippet, _snippet_dir(where, base_dir), chain + [where])
            rest = {k: v for k, v in value.items() if k != "Fn::Transform"}
            if not rest:
                return snippet
            if not isinstance(snippet, dict):
                raise TemplateError(f"Fn::Transform {INCLUDE}: {where} must hold a mapping to be merged into "
                                    f"the map beside it ({', '.join(rest)})")
            value = {**snippet, **rest}
        return {k: self.walk(v, base_dir, chain) for k, v in value.items()}

    def load(self, include: dict[str, Any], base_dir: Path | None, chain: list[str]) -> tuple[Any, str]:
        location = (include.get("Parameters") or {}).get("Location")
        if not isinstance(location, str) or not location:
            raise TemplateError(f"Transform {INCLUDE}: Parameters.Location is required (a local file or s3:// URI)")
        if base_dir is None and not location.startswith("s3://"):
            # Sent to the server: it reads nothing of its own disk for a client (`aws cloudformation
            # package` and `kinesim deploy` upload local snippets first).
            raise TemplateError(f"Transform {INCLUDE}: Location {location} must be an s3:// URI")
        where = location if "://" in location else str((base_dir / location).resolve())
        if len(chain) >= MAX_INCLUDE_DEPTH or where in chain:
            raise TemplateError(f"Transform {INCLUDE}: {location} includes itself, or snippets nest deeper than "
                                f"{MAX_INCLUDE_DEPTH}: {' -> '.join(chain + [where])}")
        if location.startswith("s3://"):
            bucket, _, key = location[5:].partition("/")
            if not bucket or not key or self.read_s3 is None:
                raise TemplateError(f"Transform {INCLUDE}: cannot read {location}")
            try:
                text = self.read_s3(bucket, key).decode("utf-8")
            except Exception as err:  # noqa: BLE001 - the S3 client's error, named in the message
                raise TemplateError(f"Transform {INCLUDE}: cannot read {location}: {err}") from None
            return parse_document(text, location), location
        if "://" in location:
            raise TemplateError(f"Transform {INCLUDE}: Location {location} is not a local file or an s3:// URI "
                                "in kinesim's object store")
        path = Path(where)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise TemplateError(f"Transform {INCLUDE}: cannot read {location} ({path}): {err.strerror}") from None
        return parse_document(text, str(path), aliases=True), str(path)  # a local file, as load_template reads one


def _snippet_dir(where: str, base_dir: Path | None) -> Path | None:
    return base_dir if where.startswith("s3://") else Path(where).parent


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


def _matches_pattern(name: str, pattern: str, value: str) -> bool:
    """A whole-value match of a Java regular expression, in linear time or under a limit."""
    try:
        return java_regex.full_matcher(pattern)(value)
    except java_regex.InvalidPattern:  # AWS's text for this is unrecorded
        raise TemplateError(f"Template format error: Parameter '{name}' has an AllowedPattern that is not a "
                            "valid regular expression") from None


def _checked_parameter(name: str, spec: dict[str, Any], raw: Any) -> Any:
    kind = str(spec.get("Type", "String"))
    if kind.startswith("AWS::SSM::Parameter"):
        return str(raw)  # the name of a Systems Manager parameter: read when the stack is deployed
    text = ",".join(map(str, raw)) if isinstance(raw, list) else \
        ("true" if raw is True else "false" if raw is False else str(raw))
    items = text.split(",") if kind == "CommaDelimitedList" or kind.startswith("List<") else [text]
    for item in items:
        if "AllowedValues" in spec and item not in [str(v) for v in spec["AllowedValues"]]:
            raise TemplateError(f"Parameter '{name}' must be one of AllowedValues")
        if "AllowedPattern" in spec and not _matches_pattern(name, str(spec["AllowedPattern"]), item):
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
