"""The template's `Rules` section, checked as CloudFormation checks it once the parameter values are
known and before any resource is touched.

Each rule has an optional `RuleCondition` and a list of `Assertions` (`Assert`, `AssertDescription`).
"If the condition evaluates to true, CloudFormation evaluates the assertions to verify whether a
parameter value is valid ... If a parameter value is invalid, CloudFormation does not create or
update the stack. If the condition evaluates to false, CloudFormation doesn't check the parameter
value and proceeds with the stack operation." (the CloudFormation User Guide, "Rule functions";
the condition defaults to true: "If you don't define a rule condition, the rule's assertions
always take effect").

A failed assertion is a ValidationError whose message is the assertion's `AssertDescription`: what
CDK users see when their bootstrap stack is too old ("CDK bootstrap stack version 6 required. Please
run 'cdk bootstrap' with a recent version of the CDK CLI."), and what ministack's CloudFormation
answers too (its pull request 1661).

The rule functions are Fn::And, Fn::Contains, Fn::EachMemberEquals, Fn::EachMemberIn, Fn::Equals,
Fn::If, Fn::Not, Fn::Or, Fn::RefAll, Fn::ValueOf and Fn::ValueOfAll, over Ref to parameters (and
pseudo parameters). The last three read the account's EC2 resources (VPCs, subnets, security groups
and their tags, for the AWS-specific parameter types), which kinesim does not emulate: a rule that
uses them is refused with a message saying so rather than evaluated against an invented answer.
"""
from __future__ import annotations

from typing import Any

from .intrinsics import Resolver
from .template import TemplateError

_EC2_FUNCTIONS = ("Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll")


def check_rules(template: dict[str, Any], parameters: dict[str, Any], pseudo: dict[str, Any] | None = None) -> None:
    """Raise TemplateError with the AssertDescription of the first assertion that fails (rules in
    template order, assertions in list order); return if every rule holds. `parameters` are the
    stack's parameter values (lists for CommaDelimitedList and List<...> types); `pseudo` the pseudo
    parameters (AWS::Region, AWS::AccountId, ...), if rules may refer to them."""
    rules = template.get("Rules")
    if rules is None:
        return
    if not isinstance(rules, dict):
        raise TemplateError("Template format error: Rules must be a map of rule names to rules")
    evaluator = _Evaluator(template, parameters, pseudo or {})
    for name, rule in rules.items():
        evaluator.check(str(name), rule)


class _Evaluator:
    def __init__(self, template: dict[str, Any], parameters: dict[str, Any], pseudo: dict[str, Any]):
        self.parameters = parameters
        self.pseudo = pseudo
        self.template = template
        self._resolver: Resolver | None = None  # for Fn::If's conditions, made when first needed

    def check(self, name: str, rule: Any) -> None:
        if not isinstance(rule, dict) or not isinstance(rule.get("Assertions"), list):
            raise TemplateError(f"Template format error: rule {name} must have an Assertions list")
        unknown = sorted(set(rule) - {"RuleCondition", "Assertions"})
        if unknown:
            raise TemplateError(f"Template format error: rule {name} has unknown members [{', '.join(unknown)}]")
        if "RuleCondition" in rule and not self.truth(rule["RuleCondition"], name, "RuleCondition"):
            return
        for index, assertion in enumerate(rule["Assertions"]):
            if not isinstance(assertion, dict) or "Assert" not in assertion:
                raise TemplateError(f"Template format error: rule {name}, Assertions[{index}] must have an Assert")
            if not self.truth(assertion["Assert"], name, f"Assertions[{index}]"):
                description = assertion.get("AssertDescription")
                # Without a description AWS's message is not documented: this one names the rule.
                raise TemplateError(str(description) if description is not None
                                    else f"Template error: assertion {index + 1} of rule {name} failed")

    def truth(self, expr: Any, rule: str, where: str) -> bool:
        value = self.value(expr, rule)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise TemplateError(f"Template error: rule {rule}, {where} must evaluate to true or false, "
                                f"not {value!r}")
        return value

    def value(self, expr: Any, rule: str) -> Any:
        """What a rule expression evaluates to: a boolean, a string or a list of strings."""
        if isinstance(expr, list):
            return [self.value(item, rule) for item in expr]
        if not isinstance(expr, dict):
            return expr
        if len(expr) != 1:
            raise TemplateError(f"Template error: rule {rule}: {expr!r} is not a rule function")
        (fn, args), = expr.items()
        if fn == "Ref":
            return self._ref(args, rule)
        if fn in ("Fn::And", "Fn::Or"):
            if not isinstance(args, list) or not 2 <= len(args) <= 10:
                raise TemplateError(f"Template error: rule {rule}: {fn} requires a list of 2 to 10 conditions")
            values = (self.truth(arg, rule, fn) for arg in args)
            return all(values) if fn == "Fn::And" else any(values)
        if fn == "Fn::Not":
            (inner,) = self._args(fn, args, 1, rule)
            return not self.truth(inner, rule, fn)
        if fn == "Fn::Equals":
            a, b = (self.value(arg, rule) for arg in self._args(fn, args, 2, rule))
            return _comparable(a, fn, rule) == _comparable(b, fn, rule)
        if fn in ("Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn"):
            first, second = (self.value(arg, rule) for arg in self._args(fn, args, 2, rule))
            members = [_text(m, fn, rule) for m in _as_list(first, fn, rule)]
            if fn == "Fn::EachMemberIn":
                allowed = {_text(m, fn, rule) for m in _as_list(second, fn, rule)}
                return all(m in allowed for m in members)
            wanted = _text(second, fn, rule)
            # Fn::Contains: "a specified string matches at least one value in a list of strings" (a
            # whole value, not a substring); Fn::EachMemberEquals: "matches all values in a list".
            return wanted in members if fn == "Fn::Contains" else all(m == wanted for m in members)
        if fn == "Fn::If":
            condition, when_true, when_false = self._args(fn, args, 3, rule)
            if self._resolver is None:
                self._resolver = Resolver(self.template, self.parameters, self.pseudo)
            return self.value(when_true if self._resolver.condition(condition) else when_false, rule)
        if fn in _EC2_FUNCTIONS:
            raise TemplateError(f"Template error: rule {rule} uses {fn}, which reads the account's EC2 resources "
                                "(VPCs, subnets, security groups): kinesim does not emulate EC2, so it cannot "
                                "evaluate the rule")
        raise TemplateError(f"Template error: rule {rule}: {fn} is not a rule function (rules may use Fn::And, "
                            "Fn::Contains, Fn::EachMemberEquals, Fn::EachMemberIn, Fn::Equals, Fn::If, Fn::Not, "
                            "Fn::Or, Fn::RefAll, Fn::ValueOf, Fn::ValueOfAll and Ref)")

    def _ref(self, name: Any, rule: str) -> Any:
        if isinstance(name, str):
            if name in self.parameters:
                return self.parameters[name]
            if name in self.pseudo:
                return self.pseudo[name]
        raise TemplateError(f"Template format error: Unresolved resource dependencies [{name}] in the Rules block "
                            f"of the template (rule {rule}: rules refer to parameters only)")

    @staticmethod
    def _args(fn: str, args: Any, count: int, rule: str) -> list[Any]:
        if not isinstance(args, list) or len(args) != count:
            raise TemplateError(f"Template error: rule {rule}: {fn} requires a list of {count} arguments")
        return args


def _text(value: Any, fn: str, rule: str) -> str:
    """A scalar as CloudFormation's string (numbers and booleans included)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TemplateError(f"Template error: rule {rule}: {fn} needs strings, got {value!r}")


def _as_list(value: Any, fn: str, rule: str) -> list[Any]:
    if isinstance(value, list):  # a literal list, or a CommaDelimitedList / List<...> parameter's value
        return value
    raise TemplateError(f"Template error: rule {rule}: {fn} needs a list of strings, got {value!r}")


def _comparable(value: Any, fn: str, rule: str) -> Any:
    return [_text(v, fn, rule) for v in value] if isinstance(value, list) else _text(value, fn, rule)
