"""A template's text (JSON, or YAML with CloudFormation's short-form tags) read into plain dicts and
lists, within bounds that a small text cannot escape.

- Nesting: at most MAX_DEPTH arrays and objects deep. Every walk of a template (the intrinsics'
  resolver, the SAM translator, cfn-lint, deep copies, the JSON written to the store) recurses on
  its nesting; past ~450 levels one of them raised RecursionError (a 500), and `Fn::Join` nested
  2,500 deep is 7,500 levels. JSON is read by Python's parser (a RecursionError there is a text
  too deep) and measured without recursion; YAML is measured as it is composed, before anything
  recurses on it. AWS's own limit and words are not on record: real templates nest a few dozen
  levels (a Step Functions definition inline, nested `Fn::If`s), 100 leaves room for them and a
  margin of four below the walks' limit.
- YAML aliases. CloudFormation refuses them: "Template error: YAML aliases are not allowed in
  CloudFormation templates." (the service's answer quoted in aws/serverless-application-model#228
  and seeebiii/aws-cloudformation-templates#1; cfn-lint's W1101 says the same). The AWS CLI's
  `package` and the SAM CLI resolve them in a local file first, and so does `kinesim deploy`
  (`aliases=True`), up to cfn-lint's bound on the expansion (`_MAX_EXPANDED_NODES`, 250,000 values):
  nine levels of nine aliases are 387 million strings from 700 bytes, and turning them into JSON
  is what held the server and its memory for good.
"""
from __future__ import annotations

import json
from typing import Any

import yaml
from cfn_tools.yaml_loader import CfnYamlLoader

from kinesim.protocol.user_json import nesting_depth

from .errors import TemplateError

MAX_DEPTH = 100
MAX_EXPANDED_VALUES = 250_000
ALIASES_REFUSED = "Template error: YAML aliases are not allowed in CloudFormation templates."

# The YAML errors of the text's structure (AWS answers them "YAML not well-formed" with the place);
# a constructor's (an unknown `!!tag`, `!GetAtt` on a map) are the content's.
_STRUCTURE_ERRORS = (yaml.scanner.ScannerError, yaml.parser.ParserError, yaml.composer.ComposerError,
                     yaml.reader.ReaderError)


class NotWellFormed(TemplateError):
    """Text that is not a JSON or YAML document. `str()` names the file (for `kinesim deploy`);
    `aws_message` is the service's answer, with the place (1-based) where the text says it."""

    def __init__(self, where: str, language: str, detail: str, place: tuple[int, int] | None = None,
                 structure: bool = True):
        super().__init__(f"Template format error: {where} is not valid YAML or JSON: {detail}")
        self.language, self.place, self.structure = language, place, structure

    @property
    def aws_message(self) -> str:
        # LocalStack's recordings of AWS: "Template format error: JSON not well-formed. (line 1,
        # column 25)" for `{"this is invalid JSON"="bobbins"}` (the column after the offending character).
        if not self.structure:
            return str(self)
        where = f" (line {self.place[0]}, column {self.place[1]})" if self.place else ""
        return f"Template format error: {self.language} not well-formed.{where}"


def too_deep(mark: yaml.Mark | None = None) -> TemplateError:
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return TemplateError(f"Template format error: a value is nested more than {MAX_DEPTH} levels deep{where}")


def read(text: str, where: str = "the template", aliases: bool = False) -> Any:
    """The document as plain data: JSON when it starts with `{`, else YAML (short-form intrinsics
    in their long `Fn::` form). `aliases`: resolve YAML aliases (a local file) rather than refuse them."""
    if text.lstrip().startswith("{"):
        return _read_json(text, where)
    return _read_yaml(text, where, aliases)


def _read_json(text: str, where: str) -> Any:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise NotWellFormed(where, "JSON", str(err), (err.lineno, err.colno + 1)) from None
    except ValueError as err:  # a number past Python's 4,300 digits
        raise NotWellFormed(where, "JSON", str(err)) from None
    except RecursionError:  # Python's parser recurses: a text this deep is past the bound anyway
        raise too_deep() from None
    # Only a text with more brackets than the bound can be too deep (counting them is C-speed).
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(doc) > MAX_DEPTH:
        raise too_deep()
    return doc


class _BoundedLoader(CfnYamlLoader):
    """cfn-flip's loader (`!Ref`, `!GetAtt`, `!Sub`... as `Fn::` maps), composing at most MAX_DEPTH
    collections deep and, unless told, no alias. PyYAML's composer and constructor recurse on the
    nesting: bounding it here bounds them too."""

    def __init__(self, text: str, aliases: bool):
        super().__init__(text)
        self.aliases = aliases
        self.aliased = False
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            if not self.aliases:
                raise TemplateError(ALIASES_REFUSED)
            self.aliased = True
            return super().compose_node(parent, index)
        if not self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise too_deep(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _read_yaml(text: str, where: str, aliases: bool) -> Any:
    try:
        loader = _BoundedLoader(text, aliases)
    except yaml.reader.ReaderError as err:  # the reader checks the characters first (a NUL: was a 500)
        raise NotWellFormed(where, "YAML", str(err)) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if loader.aliased:
            _check_expansion(node)
        return _plain(loader.construct_document(node))
    except _STRUCTURE_ERRORS as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        raise NotWellFormed(where, "YAML", str(err), (mark.line + 1, mark.column + 1) if mark else None) from None
    except (yaml.YAMLError, ValueError, TypeError, AttributeError) as err:
        # A constructor's: cfn-flip's `!GetAtt` of a map fails with an AttributeError (it was a 500).
        raise NotWellFormed(where, "YAML", str(err), structure=False) from None
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand to more than MAX_EXPANDED_VALUES values, counted
    once per distinct node (as cfn-lint's `_guard_alias_expansion` does), or nest deeper than
    MAX_DEPTH once expanded (an alias inside a deep value, to a deep value, is as deep as both);
    and one that contains itself (an alias to an enclosing anchor), which no expansion ends."""
    measured: dict[int, tuple[int, int]] = {}  # node -> (values, collections deep) once expanded
    open_nodes: set[int] = set()

    def measure(node: yaml.Node) -> tuple[int, int]:  # recursion bounded by MAX_DEPTH: the composer checked it
        key = id(node)
        if key in measured:
            return measured[key]
        if key in open_nodes:
            raise TemplateError("Template format error: a YAML alias refers to a value that contains it")
        open_nodes.add(key)
        children = [v for pair in node.value for v in pair] if isinstance(node, yaml.MappingNode) else \
            node.value if isinstance(node, yaml.SequenceNode) else []
        total, deepest = 1, 0
        for child in children:
            values, depth = measure(child)
            total, deepest = total + values, max(deepest, depth)
            if total > MAX_EXPANDED_VALUES:
                raise TemplateError(f"Template format error: the template holds more than {MAX_EXPANDED_VALUES} "
                                    "values once its YAML aliases are expanded")
        depth = deepest + 1 if isinstance(node, yaml.CollectionNode) else 0
        if depth > MAX_DEPTH:
            raise too_deep(node.start_mark)
        open_nodes.discard(key)
        measured[key] = (total, depth)
        return total, depth

    measure(root)


def _plain(value: Any) -> Any:
    """JSON's types only, as `json.loads(json.dumps(value, default=str))` gave them (the template is
    stored as JSON and compared): maps as dicts, keys as JSON writes them, dates and other YAML
    types as their text. Recursion bounded by MAX_DEPTH; shared (aliased) values are copied."""
    if isinstance(value, dict):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)  # true, null, 1, 1.5: JSON's text of them
    return str(key)  # a date: json.dumps refused it (a TypeError, answered 500)
