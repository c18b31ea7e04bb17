"""AWS::CDK::Metadata: the resource every CDK app's template carries (under the condition
CDKMetadataAvailable, true in the regions CDK reports to) for AWS's usage analytics. It makes
nothing on AWS either; here it is accepted and recorded, with a generated id as its Ref."""
from __future__ import annotations

import uuid
from typing import Any

from .resources import Applied, ResourceHandler


class CdkMetadata(ResourceHandler):
    type_name = "AWS::CDK::Metadata"
    name_property = None
    ignored = True
    note = "CDK's usage analytics: nothing to make"

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        return properties  # Analytics (a compressed list of the constructs used): recorded as given

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        return Applied(str(uuid.uuid4()), {})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        pass
