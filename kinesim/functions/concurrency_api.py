"""PutFunctionConcurrency, GetFunctionConcurrency and DeleteFunctionConcurrency: a function's
reserved concurrency, the most executions it runs at once (every version and alias together);
concurrency.py applies it to invocations.

The setting belongs to the function, not to a version or alias, and is kept in the function's
stored document as `ReservedConcurrentExecutions` (FunctionConfiguration has no such member: only
GetFunction's `Concurrency` and these operations show it). Like RecursiveLoop, changing it changes
neither RevisionId nor LastModified and starts no new execution environments.

AWS's answers (LocalStack's recordings of AWS, test_lambda_api.py::TestLambdaReservedConcurrency):
Put answers `{"ReservedConcurrentExecutions": N}`; Get answers the same, or `{}` for a function
without a reservation; Delete answers 204. A qualified name or ARN is an
InvalidParameterValueException; a missing function a ResourceNotFoundException naming
`...:function:NAME:$LATEST`. The account's concurrency (1000 by default) keeps at least 100
executions unreserved ("UnreservedConcurrentExecutions minimum", the Lambda quotas page): a
reservation that would leave fewer is refused with AWS's message, whatever the account limit it
passes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.rest import RequestContext
from .errors import invalid_parameter, resource_not_found

if TYPE_CHECKING:
    from .service import LambdaService

KEY = "ReservedConcurrentExecutions"
ACCOUNT_CONCURRENCY = 1000      # AccountLimit.ConcurrentExecutions, AWS's default quota
MIN_UNRESERVED_CONCURRENCY = 100


def reserved_concurrency(fn: dict[str, Any]) -> int | None:
    """A function's reservation, from its stored ($LATEST) document; None when it has none."""
    return fn.get(KEY)


def unreserved_concurrency(functions: dict[str, dict[str, Any]]) -> int:
    """AccountLimit.UnreservedConcurrentExecutions: the account's concurrency no function reserved."""
    return ACCOUNT_CONCURRENCY - sum(fn.get(KEY) or 0 for fn in functions.values())


def _function(svc: LambdaService, ref: str) -> dict[str, Any]:
    """The stored document of the function an unqualified reference names."""
    name, qualifier = svc.parse_function_ref(ref)
    if qualifier is not None:
        raise invalid_parameter("This operation is permitted on Lambda functions only. Aliases and versions do not "
                                "support this operation. Please specify either a function name or an unqualified "
                                "function ARN.")
    fn = svc.functions.get(name)
    if fn is None:
        raise resource_not_found(f"Function not found: {svc.function_arn(name, '$LATEST')}")
    return fn


def put_function_concurrency(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    reserved = p[KEY]
    with svc.lock:
        fn = _function(svc, p["FunctionName"])
        others = {n: f for n, f in svc.functions.items() if n != fn["FunctionName"]}
        if unreserved_concurrency(others) - reserved < MIN_UNRESERVED_CONCURRENCY:
            raise invalid_parameter("Specified ReservedConcurrentExecutions for function decreases account's "
                                    f"UnreservedConcurrentExecution below its minimum value of "
                                    f"[{MIN_UNRESERVED_CONCURRENCY}].")
        svc.save_function({**fn, KEY: reserved})
    return {KEY: reserved}


def get_function_concurrency(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    reserved = reserved_concurrency(_function(svc, p["FunctionName"]))
    return {} if reserved is None else {KEY: reserved}


def delete_function_concurrency(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    with svc.lock:
        fn = _function(svc, p["FunctionName"])
        svc.save_function({k: v for k, v in fn.items() if k != KEY})
    return {}
