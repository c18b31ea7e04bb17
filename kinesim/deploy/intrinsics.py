"""CloudFormation's intrinsic functions and Conditions, resolved as CloudFormation resolves them.

A `Resolver` knows the parameter values, the pseudo parameters and, as the deploy goes on, the
physical id and attributes of each resource already created. `resolve()` turns a template value
into plain data; `references()` lists the resources a value depends on, which is what orders
the deploy. Messages for template mistakes are CloudFormation's own wording.
"""
from __future__ import annotations

import base64
import re
from typing import Any, Callable, Iterator

from kinesim.config import partition_of

from .template import TemplateError

PSEUDO_PARAMETERS = ("AWS::AccountId", "AWS::NotificationARNs", "AWS::NoValue", "AWS::Partition",
                     "AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix")


class _NoValue:
    """`Ref: AWS::NoValue`: the property (or list item) that holds it is removed."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()

# The longest chain of conditions naming conditions evaluated (kinesim's bound, far past real templates).
MAX_CONDITION_CHAIN = 100

# `${Name}`, `${Resource.Attribute}` and the escaped literal `${!Text}`.
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


def pseudo_parameters(region: str, account_id: str, stack_name: str, stack_id: str) -> dict[str, Any]:
    return {"AWS::Region": region, "AWS::AccountId": account_id, "AWS::StackName": stack_name,
            "AWS::StackId": stack_id, "AWS::Partition": partition_of(region),
            "AWS::URLSuffix": "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com",
            "AWS::NotificationARNs": [], "AWS::NoValue": NO_VALUE}


class Resolver:
    def __init__(self, template: dict[str, Any], parameters: dict[str, Any], pseudo: dict[str, Any],
                 imports: Callable[[str], Any] | None = None):
        self.template = template
        self.imports = imports  # an export's value by name (None: no other stacks to import from)
        self.imported: set[str] = set()  # the export names Fn::ImportValue resolved
        self.parameters = parameters
        self.pseudo = pseudo
        self.physical_ids: dict[str, str] = {}
        self.attributes: dict[str, dict[str, Any]] = {}
        self._conditions: dict[str, bool] = {}
        self._evaluating: set[str] = set()

    @property
    def resources(self) -> dict[str, Any]:
        return self.template.get("Resources", {})

    def known(self, logical_id: str, physical_id: str, attributes: dict[str, Any]) -> None:
        """Record a resource that now exists, for the Refs and GetAtts that follow."""
        self.physical_ids[logical_id] = physical_id
        self.attributes[logical_id] = attributes

    # Conditions

    def condition(self, name: str) -> bool:
        if name in self._conditions:
            return self._conditions[name]
        conditions = self.template.get("Conditions") or {}
        if name not in conditions:
            raise TemplateError(f"Template format error: Unresolved condition dependency {name}.")
        if name in self._evaluating:
            raise TemplateError(f"Template format error: Circular dependency in condition {name}.")
        if len(self._evaluating) >= MAX_CONDITION_CHAIN:
            # Each condition that names another is one level of recursion here, and nesting does
            # not bound them (5,000 one-line conditions, each naming the next, fit in 1 MB): a
            # RecursionError was answered 500. AWS's limit and words are not on record.
            raise TemplateError(f"Template format error: conditions name one another more than "
                                f"{MAX_CONDITION_CHAIN} deep (at condition {name})")
        self._evaluating.add(name)
        try:
            value = self._condition_value(conditions[name], name)
        finally:
            self._evaluating.discard(name)
        self._conditions[name] = value
        return value

    def included(self, logical_id: str) -> bool:
        """Whether a resource is part of the stack: its `Condition`, if any, holds."""
        name = self.resources[logical_id].get("Condition")
        return True if name is None else self.condition(name)

    def _condition_value(self, expr: Any, where: str) -> bool:
        if isinstance(expr, dict) and len(expr) == 1:
            (fn, args), = expr.items()
            if fn == "Condition":
                return self.condition(args)
            if fn == "Fn::Equals":
                a, b = self._args(fn, args, 2)
                return _as_text(self.resolve(a)) == _as_text(self.resolve(b))
            if fn == "Fn::Not":
                (inner,) = self._args(fn, args, 1)
                return not self._condition_value(inner, where)
            if fn in ("Fn::And", "Fn::Or"):
                if not isinstance(args, list) or not 2 <= len(args) <= 10:
                    raise TemplateError(f"Template error: {fn} requires a list of 2 to 10 conditions")
                values = (self._condition_value(arg, where) for arg in args)
                return all(values) if fn == "Fn::And" else any(values)
        if isinstance(expr, bool):
            return expr
        if isinstance(expr, str) and expr.lower() in ("true", "false"):
            return expr.lower() == "true"
        raise TemplateError(f"Template format error: condition {where} must be built from Fn::Equals, "
                            "Fn::Not, Fn::And, Fn::Or and Condition")

    # Values

    def resolve(self, value: Any) -> Any:
        """`value` with every intrinsic function replaced by its result."""
        if isinstance(value, dict):
            if len(value) == 1:
                (key, args), = value.items()
                if key == "Ref" or key.startswith("Fn::"):
                    return self._function(key, args)
            out = {}
            for k, v in value.items():
                resolved = self.resolve(v)
                if resolved is not NO_VALUE:
                    out[k] = resolved
            return out
        if isinstance(value, list):
            return [item for item in (self.resolve(v) for v in value) if item is not NO_VALUE]
        return value

    def _function(self, fn: str, args: Any) -> Any:
        if fn == "Ref":
            return self._ref(self.resolve(args) if isinstance(args, dict) else args)
        if fn == "Fn::GetAtt":
            logical_id, attribute = self.getatt_target(args)
            return self._getatt(logical_id, attribute)
        if fn == "Fn::Sub":
            return self._sub(args)
        if fn == "Fn::Join":
            delimiter, items = self._args(fn, args, 2)
            items = self.resolve(items)
            if not isinstance(delimiter, str) or not isinstance(items, list):
                raise TemplateError("Template error: every Fn::Join object requires two parameters, "
                                    "(1) a string delimiter and (2) a list of strings to be joined")
            return delimiter.join(_as_text(item, "Fn::Join") for item in items)
        if fn == "Fn::Select":
            index, items = self._args(fn, args, 2)
            index, items = self.resolve(index), self.resolve(items)
            try:
                position = int(index)
            except (TypeError, ValueError):
                raise TemplateError("Template error: Fn::Select requires an integer index") from None
            if not isinstance(items, list) or not 0 <= position < len(items):
                raise TemplateError(f"Template error: Fn::Select cannot select nonexistent value at index {index}")
            return items[position]
        if fn == "Fn::Split":
            delimiter, text = self._args(fn, args, 2)
            text = self.resolve(text)
            if not isinstance(delimiter, str) or not isinstance(text, str):
                raise TemplateError("Template error: Fn::Split requires a string delimiter and a string")
            return text.split(delimiter)
        if fn == "Fn::If":
            name, when_true, when_false = self._args(fn, args, 3)
            return self.resolve(when_true if self.condition(name) else when_false)
        if fn == "Fn::Equals":
            return self._condition_value({fn: args}, "Fn::Equals")
        if fn in ("Fn::Not", "Fn::And", "Fn::Or"):
            return self._condition_value({fn: args}, fn)
        if fn == "Fn::FindInMap":
            return self._find_in_map(args)
        if fn == "Fn::Base64":
            return base64.b64encode(_as_text(self.resolve(args), fn).encode()).decode()
        if fn == "Fn::GetAZs":
            region = self.resolve(args) or self.pseudo["AWS::Region"]
            return [f"{region}{zone}" for zone in "abc"]
        if fn == "Fn::ImportValue":
            name = self.resolve(args)
            if not isinstance(name, str):
                raise TemplateError("Template error: the argument of Fn::ImportValue must be a string")
            value = self.imports(name) if self.imports is not None else None
            if value is None:
                raise TemplateError(f"No export named {name} found.")
            self.imported.add(name)
            return value
        raise TemplateError(f"Template error: {fn} is not supported by kinesim deploy")

    def _ref(self, name: Any) -> Any:
        if not isinstance(name, str):
            raise TemplateError("Template error: Ref needs the name of a parameter or resource")
        if name in self.parameters:
            return self.parameters[name]
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.physical_ids:
            return self.physical_ids[name]
        raise TemplateError(f"Template format error: Unresolved resource dependencies [{name}] "
                            "in the Resources block of the template")

    @staticmethod
    def getatt_target(args: Any) -> tuple[str, str]:
        """`[Resource, Attribute]` or `"Resource.Attribute"` as a pair."""
        if isinstance(args, str) and "." in args:
            logical_id, attribute = args.split(".", 1)
            return logical_id, attribute
        if isinstance(args, list) and len(args) == 2 and all(isinstance(a, str) for a in args):
            return args[0], args[1]
        raise TemplateError("Template error: every Fn::GetAtt object requires two non-empty parameters, "
                            "the resource name and the resource attribute")

    def _getatt(self, logical_id: str, attribute: str) -> Any:
        if logical_id not in self.attributes:
            raise TemplateError(f"Template format error: Unresolved resource dependencies [{logical_id}] "
                                "in the Resources block of the template")
        attributes = self.attributes[logical_id]
        if attribute not in attributes:
            raise TemplateError(f"Template error: resource {logical_id} does not support attribute type "
                                f"{attribute} in Fn::GetAtt")
        return attributes[attribute]

    def _sub(self, args: Any) -> str:
        if isinstance(args, list) and len(args) == 2 and isinstance(args[1], dict):
            text, variables = args[0], {k: self.resolve(v) for k, v in args[1].items()}
        else:
            text, variables = args, {}
        if not isinstance(text, str):
            raise TemplateError("Template error: Fn::Sub needs a string, or a string and a map of variables")

        def value_of(match: re.Match) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return _as_text(variables[name], "Fn::Sub")
            if "." in name and name not in self.parameters:
                return _as_text(self._getatt(*name.split(".", 1)), "Fn::Sub")
            return _as_text(self._ref(name), "Fn::Sub")

        return _SUB_VARIABLE.sub(value_of, text)

    def _find_in_map(self, args: Any) -> Any:
        if not isinstance(args, list) or len(args) not in (3, 4):
            raise TemplateError("Template error: Fn::FindInMap requires a map name, a top-level key and a "
                                "second-level key")
        name, top, second = (self.resolve(a) for a in args[:3])
        mapping = (self.template.get("Mappings") or {}).get(name)
        if mapping is None:
            raise TemplateError(f"Template error: Mapping named '{name}' is not present in the 'Mappings' "
                                "section of template")
        try:
            return mapping[top][second]
        except (KeyError, TypeError):
            if len(args) == 4 and isinstance(args[3], dict) and "DefaultValue" in args[3]:
                return self.resolve(args[3]["DefaultValue"])
            raise TemplateError(f"Template error: Unable to get mapping for {name}::{top}::{second}") from None

    @staticmethod
    def _args(fn: str, args: Any, count: int) -> list[Any]:
        if not isinstance(args, list) or len(args) != count:
            raise TemplateError(f"Template error: {fn} requires a list of {count} arguments")
        return args

    # Dependencies

    def references(self, value: Any, every_branch: bool = False) -> Iterator[tuple[str, str | None]]:
        """Every (name, attribute) that `value` refers to with Ref (attribute None), Fn::GetAtt or
        Fn::Sub; parameters and pseudo parameters are left out. Only the taken branch of an
        Fn::If counts, as in CloudFormation, unless `every_branch` (conditions not yet known)."""
        if isinstance(value, list):
            for item in value:
                yield from self.references(item, every_branch)
            return
        if not isinstance(value, dict):
            return
        if len(value) == 1:
            (key, args), = value.items()
            if key == "Ref" and isinstance(args, str):
                if args not in self.parameters and args not in self.pseudo:
                    yield args, None
                return
            if key == "Fn::GetAtt":
                yield self.getatt_target(args)
                return
            if key == "Fn::Sub":
                text, variables = (args[0], args[1]) if isinstance(args, list) and len(args) == 2 else (args, {})
                yield from self.references(variables, every_branch)
                for name in _SUB_VARIABLE.findall(text if isinstance(text, str) else ""):
                    if name.startswith("!") or name in variables or name in self.parameters or name in self.pseudo:
                        continue
                    yield (tuple(name.split(".", 1)) if "." in name else (name, None))  # type: ignore[misc]
                return
            if key == "Fn::If" and isinstance(args, list) and len(args) == 3 and not every_branch:
                yield from self.references(args[1] if self.condition(args[0]) else args[2])
                return
        for item in value.values():
            yield from self.references(item, every_branch)


def _as_text(value: Any, where: str = "Fn::Equals") -> str:
    """A scalar as CloudFormation's string (numbers and booleans included); lists are an error."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TemplateError(f"Template error: {where} needs strings, got {type(value).__name__} {value!r}")
