"""PutFunctionRecursionConfig and GetFunctionRecursionConfig: whether Lambda stops a function's
recursive loops (`Terminate`, the default) or lets them run (`Allow`); recursion.py says how.

The setting belongs to the function, not to a version or alias (the API takes an unqualified
name), and is kept in the function's stored document as `RecursiveLoop`: no other answer of AWS's
API shows it (FunctionConfiguration has no such member, and the REST layer drops keys the model
does not know). Changing it changes neither RevisionId nor LastModified, and starts no new
execution environments: it is read at each invocation.

AWS's answers (LocalStack's recordings of AWS, test_lambda_api.py::TestLambdaRecursion): both
operations answer `{"RecursiveLoop": ...}`; Get of a function never configured says `Terminate`;
an unknown value is a ValidationException listing `[Terminate, Allow]` (the model's checks, with
that order in protocol/constraints.py's AWS_ENUM_ORDER); a missing function is
ResourceNotFoundException.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.rest import RequestContext
from .recursion import DEFAULT_RECURSIVE_LOOP

if TYPE_CHECKING:
    from .service import LambdaService

KEY = "RecursiveLoop"


def recursive_loop(fn: dict[str, Any]) -> str:
    """A function's setting, from its stored ($LATEST) document."""
    return fn.get(KEY) or DEFAULT_RECURSIVE_LOOP


def put_function_recursion_config(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, _ = svc.parse_function_ref(p["FunctionName"])
    with svc.lock:
        fn = svc.function(name)
        svc.save_function({**fn, KEY: p[KEY]})
    return {KEY: p[KEY]}


def get_function_recursion_config(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, _ = svc.parse_function_ref(p["FunctionName"])
    return {KEY: recursive_loop(svc.function(name))}
