"""Lambda versions, aliases and layers: AWS::Lambda::Version, AWS::Lambda::Alias and
AWS::Lambda::LayerVersion (what SAM's `AutoPublishAlias` and `AWS::Serverless::LayerVersion`
become), and the CodeDeploy resources of SAM's `DeploymentPreference`, accepted and ignored.

As on CloudFormation, `Ref` to a version gives its qualified ARN, to an alias the alias ARN, to a
layer version its LayerVersionArn; all three are the physical ids. A version and a layer version
cannot change: any change of their properties replaces them (their schemas make every property
create-only), which publishes anew.
"""
from __future__ import annotations

from typing import Any

from .resources import (Applied, RecordedResource, ResourceHandler, _input_shape, coerce, generated_name, local_code,
                        unless_gone)
from .template import DeployError


class LambdaVersion(ResourceHandler):
    type_name = "AWS::Lambda::Version"
    attributes = frozenset({"Version", "FunctionArn"})

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, {"FunctionName", "Description", "CodeSha256"})
        if "FunctionName" not in properties:
            raise DeployError("property FunctionName is required")
        return {k: str(v) for k, v in properties.items()}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        # PublishVersion answers with the last version when nothing changed since: like
        # CloudFormation, the resource then stands for that version.
        response = self.target.lambda_.publish_version(**desired)
        arn = response["FunctionArn"]
        return Applied(arn, {"Version": response["Version"], "FunctionArn": arn})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes  # every property is create-only: a change replaces the version

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        unless_gone(lambda: self.target.lambda_.delete_function(FunctionName=physical_id))


class LambdaAlias(ResourceHandler):
    type_name = "AWS::Lambda::Alias"
    attributes = frozenset({"AliasArn"})

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, {"FunctionName", "FunctionVersion", "Name", "Description",
                                              "RoutingConfig"})
        for required in ("FunctionName", "FunctionVersion", "Name"):
            if required not in properties:
                raise DeployError(f"property {required} is required")
        out = {k: str(properties[k]) for k in ("FunctionName", "FunctionVersion", "Name", "Description")
               if k in properties}
        out["RoutingConfig"] = self._routing(properties.get("RoutingConfig"))
        return out

    @staticmethod
    def _routing(routing: Any) -> dict[str, Any]:
        """CloudFormation's `[{FunctionVersion, FunctionWeight}]` as the API's version -> weight map."""
        weights = (routing or {}).get("AdditionalVersionWeights") if isinstance(routing, dict) else None
        if routing is not None and not isinstance(routing, dict):
            raise DeployError("property RoutingConfig must be an object with AdditionalVersionWeights")
        try:
            return {"AdditionalVersionWeights": {str(w["FunctionVersion"]): float(w["FunctionWeight"])
                                                 for w in weights or []}}
        except (KeyError, TypeError, ValueError):
            raise DeployError("RoutingConfig.AdditionalVersionWeights must be a list of {FunctionVersion, "
                              "FunctionWeight}") from None

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        response = self.target.lambda_.create_alias(**desired)
        return Applied(response["AliasArn"], {"AliasArn": response["AliasArn"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        # With a DeploymentPreference, CodeDeploy would shift traffic gradually; here the alias
        # moves at once (the CodeDeploy resources are ignored, and say so).
        self.target.lambda_.update_alias(FunctionName=new["FunctionName"], Name=new["Name"],
                                         FunctionVersion=new["FunctionVersion"],
                                         Description=new.get("Description", ""), RoutingConfig=new["RoutingConfig"])
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        unless_gone(lambda: self.target.lambda_.delete_alias(FunctionName=desired["FunctionName"],
                                                             Name=desired["Name"]))


class LambdaLayerVersion(ResourceHandler):
    type_name = "AWS::Lambda::LayerVersion"
    name_property = "LayerName"
    name_max_length = 140
    attributes = frozenset({"LayerVersionArn"})

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        shape = _input_shape(self.target.lambda_, "PublishLayerVersion")
        self._reject_unsupported(properties, {"LayerName", "Description", "Content", "CompatibleRuntimes",
                                              "CompatibleArchitectures", "LicenseInfo"})
        if "Content" not in properties:
            raise DeployError("property Content is required")
        out = coerce(shape, {k: v for k, v in properties.items() if k != "Content"})
        content = properties["Content"]
        if isinstance(content, str):  # a local path: `aws cloudformation package` and kinesim deploy upload it first
            raise local_code(content)
        if isinstance(content, dict) and content.get("S3Bucket") and content.get("S3Key"):
            out["Content"] = {k: str(v) for k, v in content.items()}
        else:
            raise DeployError("property Content must be {S3Bucket, S3Key}")
        return out

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        content = desired["Content"]
        if "ZipSha256" in content:  # recorded by kinesim deploy before it uploaded code to S3
            raise DeployError("the layer's package was zipped by an older kinesim deploy and is not at hand: "
                              "deploy the template again")
        response = self.target.lambda_.publish_layer_version(
            **{**{k: v for k, v in desired.items() if k != "Content"}, "LayerName": name, "Content": content})
        arn = response["LayerVersionArn"]
        return Applied(arn, {"LayerVersionArn": arn})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes  # every property is create-only: a change publishes a new version

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        name, number = physical_id.split(":")[6], int(physical_id.split(":")[7])
        self.target.lambda_.delete_layer_version(LayerName=name, VersionNumber=number)  # gone already: 204


class CodeDeployResource(RecordedResource):
    """SAM's DeploymentPreference makes a CodeDeploy application and deployment group to shift an
    alias's traffic gradually. CodeDeploy is not emulated: accepted, recorded, nothing made."""
    note = "CodeDeploy is not emulated: an alias moves to its new version at once (no gradual traffic shifting)"


class CodeDeployApplication(CodeDeployResource):
    type_name = "AWS::CodeDeploy::Application"
    name_property = "ApplicationName"
    name_max_length = 100

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        return Applied(name, {})


class CodeDeployDeploymentGroup(CodeDeployResource):
    type_name = "AWS::CodeDeploy::DeploymentGroup"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        return Applied(desired.get("DeploymentGroupName") or generated_name(self.target.stack_name,
                                                                            "DeploymentGroup", 100), {})
