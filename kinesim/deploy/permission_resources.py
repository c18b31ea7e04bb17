"""AWS::Lambda::Permission: one statement of a function's resource-based policy, made with
AddPermission and removed with RemovePermission.

CloudFormation gives the statement a generated id (`stack-LogicalId-SUFFIX`), which is what `Ref`
and `Fn::GetAtt Id` return. Every property is create-only: a change replaces the statement.
"""
from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .resources import Applied, ResourceHandler, _input_shape, coerce, error_code
from .template import DeployError


class LambdaPermission(ResourceHandler):
    type_name = "AWS::Lambda::Permission"
    # Not a template property: the statement id the stack generates, as CloudFormation does.
    name_property = "StatementId"
    name_max_length = 100
    attributes = frozenset({"Id"})
    note = "kept in the function's policy (GetPolicy); kinesim does not enforce resource policies"
    SUPPORTED = {"Action", "FunctionName", "Principal", "SourceArn", "SourceAccount", "EventSourceToken",
                 "FunctionUrlAuthType", "PrincipalOrgID", "InvokedViaFunctionUrl"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        missing = sorted({"Action", "FunctionName", "Principal"} - set(properties))
        if missing:
            raise DeployError(f"property {', '.join(missing)} is required")
        return coerce(_input_shape(self.target.lambda_, "AddPermission"), dict(properties))

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        # Statement ids allow [a-zA-Z0-9-_]: a generated name (stack-LogicalId-SUFFIX) fits.
        assert name
        statement_id = name
        self.target.lambda_.add_permission(StatementId=statement_id, **desired)
        return Applied(statement_id, {"Id": statement_id})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        # Every property is create-only (the schema's createOnlyProperties): a change replaces it.
        raise DeployError("a permission cannot be updated in place")

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        try:
            self.target.lambda_.remove_permission(FunctionName=desired["FunctionName"], StatementId=physical_id)
        except ClientError as err:
            if error_code(err) != "ResourceNotFoundException":  # the function or the statement is gone
                raise
