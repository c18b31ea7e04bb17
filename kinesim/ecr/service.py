"""The Amazon ECR service, minimal: repositories (documents of kind "ecr-repository" in the store),
with their tag mutability, scanning and encryption settings, lifecycle policy, repository policy and
tags. kinesim has no container registry: repositories stay empty (ListImages and DescribeImages
answer with nothing) and the operations that push or pull images are not emulated.

Each operation is a plain function `(service, params) -> response dict` in the module of its
concern, named in the table of `operations.py`: `repositories_api` (repositories, their settings and
tags), `policies_api` (lifecycle and repository policies), `images_api` (the empty listings).
"""
from __future__ import annotations

import re
import threading
from typing import Any

from kinesim.config import Settings, partition_of
from kinesim.protocol.errors import AwsError
from kinesim.protocol.operations import JsonService
from kinesim.protocol.validation import ModelValidator
from kinesim.store import Store

from ..protocol.models import service_model
from .errors import NAME_EXPRESSION, invalid_at, repository_not_found
from .operations import OPERATIONS

REPOSITORY_KIND = "ecr-repository"


class EcrService(JsonService):
    operations = OPERATIONS
    target_prefix = "AmazonEC2ContainerRegistry_V20150921"

    def __init__(self, settings: Settings, store: Store):
        self.settings = settings
        self.store = store
        self.validator = ModelValidator("ecr")
        self.lock = threading.RLock()  # read-modify-write of a repository's document
        # The model's pattern decides which names are valid (AWS quotes an older one when refusing).
        model = service_model("ecr")
        self._name_pattern = re.compile(model.shape_for("RepositoryName").metadata["pattern"])

    def call(self, op: str, params: dict[str, Any], cbor: bool = False) -> dict[str, Any]:
        handler = self.operations.get(op)
        if handler is None:  # in the model, not emulated: kinesim's 501, as for Lambda's and Logs'
            raise AwsError("NotImplementedException",
                           f"kinesim does not implement the Amazon ECR operation {op}: kinesim has no container "
                           "registry, so images cannot be pushed to or pulled from its repositories (they exist "
                           "for the templates that declare them, such as CDK's bootstrap stack).", 501)
        if op == "CreateRepository" and isinstance(params, dict):
            name = params.get("repositoryName")
            # AWS answers a name outside the pattern with its own sentence, not Coral's constraint
            # message (LocalStack issue 8051 quotes it: `aws ecr create-repository --repository-name tesTing`).
            if isinstance(name, str) and 2 <= len(name) <= 256 and not self._name_pattern.fullmatch(name):
                raise invalid_at("repositoryName", f"must satisfy regular expression '{NAME_EXPRESSION}'")
        return handler(self, self.validator.parse(op, params, cbor=cbor))

    def has_operation(self, op: str) -> bool:
        return op in self.validator.operations

    # identity

    @property
    def registry_id(self) -> str:
        """The registry of the account: its id is the account id."""
        return self.settings.account_id

    def repository_arn(self, name: str) -> str:
        s = self.settings
        return f"arn:{partition_of(s.region)}:ecr:{s.region}:{self.registry_id}:repository/{name}"

    def repository_uri(self, name: str) -> str:
        suffix = "amazonaws.com.cn" if self.settings.region.startswith("cn-") else "amazonaws.com"
        return f"{self.registry_id}.dkr.ecr.{self.settings.region}.{suffix}/{name}"

    def name_of_arn(self, arn: str) -> str:
        """The repository an ARN names (`arn:PARTITION:ecr:REGION:ACCOUNT:repository/NAME`)."""
        parts = arn.split(":", 5)
        if len(parts) != 6 or parts[0] != "arn" or parts[2] != "ecr" or not parts[5].startswith("repository/") \
                or not parts[5][len("repository/"):]:
            raise invalid_at("resourceArn", "Invalid ARN")
        if parts[4] != self.registry_id or parts[3] != self.settings.region:
            raise repository_not_found(parts[5][len("repository/"):], parts[4])
        return parts[5][len("repository/"):]

    # repositories

    def repository(self, name: str, registry_id: str | None = None) -> dict[str, Any]:
        """A repository's document; AWS's RepositoryNotFoundException if the registry has none by that name."""
        registry = registry_id or self.registry_id
        doc = self.store.document(REPOSITORY_KIND, name) if registry == self.registry_id else None
        if doc is None:
            raise repository_not_found(name, registry)
        return doc

    def repositories(self) -> dict[str, dict[str, Any]]:
        return self.store.documents(REPOSITORY_KIND)

    def save(self, name: str, doc: dict[str, Any]) -> None:
        self.store.put_document(REPOSITORY_KIND, name, doc)

    def forget(self, name: str) -> None:
        self.store.delete_document(REPOSITORY_KIND, name)

    def describe(self, name: str, doc: dict[str, Any]) -> dict[str, Any]:
        """The `Repository` structure AWS answers with."""
        out: dict[str, Any] = {"repositoryArn": self.repository_arn(name), "registryId": self.registry_id,
                               "repositoryName": name, "repositoryUri": self.repository_uri(name),
                               "createdAt": doc["createdAt"], "imageTagMutability": doc["imageTagMutability"]}
        if doc.get("imageTagMutabilityExclusionFilters"):
            out["imageTagMutabilityExclusionFilters"] = doc["imageTagMutabilityExclusionFilters"]
        out.update(imageScanningConfiguration=doc["imageScanningConfiguration"],
                   encryptionConfiguration=doc["encryptionConfiguration"])
        return out
