"""Amazon ECR (minimal) through the real server with boto3: repositories and their settings,
lifecycle and repository policies, tags, the empty image listings, AWS's errors, kinesim's 501 for
what needs a registry, and repositories kept across a restart."""
from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.server import ServerProcess

ACCOUNT = "000000000000"
LIFECYCLE = json.dumps({"rules": [{"rulePriority": 1, "description": "expire untagged images after a year",
                                   "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed",
                                                 "countUnit": "days", "countNumber": 365},
                                   "action": {"type": "expire"}}]})
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Sid": "LambdaPull", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
    "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]}]})


@pytest.fixture(scope="module")
def ecr(server):
    return client_for(server.url, "ecr")


@pytest.fixture
def name(ecr):
    repository = f"team/app-{uuid.uuid4().hex[:10]}"
    yield repository
    try:
        ecr.delete_repository(repositoryName=repository, force=True)
    except ecr.exceptions.RepositoryNotFoundException:
        pass


def error_of(call, **kwargs) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    response = caught.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_create_describe_and_delete(ecr, name):
    made = ecr.create_repository(repositoryName=name)["repository"]
    assert made["repositoryArn"] == f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/{name}"
    assert made["repositoryUri"] == f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{name}"
    assert made["registryId"] == ACCOUNT and made["repositoryName"] == name
    # AWS's defaults: mutable tags, no scan on push, AES256 encryption.
    assert made["imageTagMutability"] == "MUTABLE"
    assert made["imageScanningConfiguration"] == {"scanOnPush": False}
    assert made["encryptionConfiguration"] == {"encryptionType": "AES256"}
    described = ecr.describe_repositories(repositoryNames=[name])["repositories"]
    assert described == [made]
    assert ecr.describe_repositories(registryId=ACCOUNT, repositoryNames=[name])["repositories"] == [made]
    assert ecr.delete_repository(repositoryName=name)["repository"] == made
    assert error_of(ecr.describe_repositories, repositoryNames=[name]) == (
        "RepositoryNotFoundException",
        f"The repository with name '{name}' does not exist in the registry with id '{ACCOUNT}'", 400)
    assert error_of(ecr.delete_repository, repositoryName=name)[0] == "RepositoryNotFoundException"


def test_create_with_settings_and_errors(ecr, name):
    made = ecr.create_repository(repositoryName=name, imageTagMutability="IMMUTABLE",
                                 imageScanningConfiguration={"scanOnPush": True},
                                 encryptionConfiguration={"encryptionType": "KMS", "kmsKey": "alias/mine"},
                                 tags=[{"Key": "team", "Value": "data"}])["repository"]
    assert made["imageTagMutability"] == "IMMUTABLE"
    assert made["imageScanningConfiguration"] == {"scanOnPush": True}
    assert made["encryptionConfiguration"] == {"encryptionType": "KMS", "kmsKey": "alias/mine"}
    assert ecr.list_tags_for_resource(resourceArn=made["repositoryArn"])["tags"] == [{"Key": "team", "Value": "data"}]
    assert error_of(ecr.create_repository, repositoryName=name) == (
        "RepositoryAlreadyExistsException",
        f"The repository with name '{name}' already exists in the registry with id '{ACCOUNT}'", 400)
    # LocalStack issue 8051 records AWS's answer to capitals in a name.
    assert error_of(ecr.create_repository, repositoryName="tesTing") == (
        "InvalidParameterException",
        "Invalid parameter at 'repositoryName' failed to satisfy constraint: 'must satisfy regular expression "
        "'(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*''", 400)
    code, message, _ = error_of(ecr.create_repository, repositoryName=f"{name}-x",
                                imageTagMutability="MUTABLE_WITH_EXCLUSION")
    assert code == "InvalidParameterException" and "ImageTagMutabilityExclusionFilters can't be null" in message


def test_tag_mutability_and_scanning_are_changed(ecr, name):
    ecr.create_repository(repositoryName=name)
    answer = ecr.put_image_tag_mutability(repositoryName=name, imageTagMutability="IMMUTABLE")
    assert (answer["registryId"], answer["repositoryName"], answer["imageTagMutability"]) == \
        (ACCOUNT, name, "IMMUTABLE")
    filters = [{"filterType": "WILDCARD", "filter": "latest*"}]
    answer = ecr.put_image_tag_mutability(repositoryName=name, imageTagMutability="IMMUTABLE_WITH_EXCLUSION",
                                          imageTagMutabilityExclusionFilters=filters)
    assert answer["imageTagMutabilityExclusionFilters"] == filters
    answer = ecr.put_image_scanning_configuration(repositoryName=name, imageScanningConfiguration={"scanOnPush": True})
    assert answer["imageScanningConfiguration"] == {"scanOnPush": True}
    described = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    assert described["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
    assert described["imageTagMutabilityExclusionFilters"] == filters
    assert described["imageScanningConfiguration"] == {"scanOnPush": True}
    assert error_of(ecr.put_image_tag_mutability, repositoryName=f"{name}-none",
                    imageTagMutability="MUTABLE")[0] == "RepositoryNotFoundException"


def test_lifecycle_policy(ecr, name):
    ecr.create_repository(repositoryName=name)
    assert error_of(ecr.get_lifecycle_policy, repositoryName=name) == (
        "LifecyclePolicyNotFoundException",
        f"Lifecycle policy does not exist for the repository with name '{name}' in the registry with id '{ACCOUNT}'",
        400)
    put = ecr.put_lifecycle_policy(repositoryName=name, lifecyclePolicyText=LIFECYCLE)
    assert (put["registryId"], put["repositoryName"], put["lifecyclePolicyText"]) == (ACCOUNT, name, LIFECYCLE)
    assert ecr.get_lifecycle_policy(repositoryName=name)["lifecyclePolicyText"] == LIFECYCLE
    assert ecr.delete_lifecycle_policy(repositoryName=name)["lifecyclePolicyText"] == LIFECYCLE
    assert error_of(ecr.delete_lifecycle_policy, repositoryName=name)[0] == "LifecyclePolicyNotFoundException"
    failure = "Invalid parameter at 'LifecyclePolicyText' failed to satisfy constraint: 'Lifecycle policy validation " \
              "failure: "
    padding = " " * 100  # the model's minimum length is 100
    assert error_of(ecr.put_lifecycle_policy, repositoryName=name, lifecyclePolicyText="not json" + padding) == (
        "InvalidParameterException", failure + "Could not map policyString into LifecyclePolicy.'", 400)
    assert error_of(ecr.put_lifecycle_policy, repositoryName=name, lifecyclePolicyText="{}" + padding) == (
        "InvalidParameterException", failure + 'object has missing required properties (["rules"])\'', 400)
    no_action = json.dumps({"rules": [{"rulePriority": 1, "selection": {}}]}) + padding
    assert error_of(ecr.put_lifecycle_policy, repositoryName=name, lifecyclePolicyText=no_action)[1] == \
        failure + 'object has missing required properties (["action"])\''
    assert error_of(ecr.put_lifecycle_policy, repositoryName=f"{name}-none",
                    lifecyclePolicyText=LIFECYCLE)[0] == "RepositoryNotFoundException"


def test_repository_policy(ecr, name):
    ecr.create_repository(repositoryName=name)
    assert error_of(ecr.get_repository_policy, repositoryName=name) == (
        "RepositoryPolicyNotFoundException",
        f"Repository policy does not exist for the repository with name '{name}' in the registry with id '{ACCOUNT}'",
        400)
    assert ecr.set_repository_policy(repositoryName=name, policyText=POLICY)["policyText"] == POLICY
    assert ecr.get_repository_policy(repositoryName=name)["policyText"] == POLICY
    assert ecr.delete_repository_policy(repositoryName=name)["policyText"] == POLICY
    assert error_of(ecr.delete_repository_policy, repositoryName=name)[0] == "RepositoryPolicyNotFoundException"
    assert error_of(ecr.set_repository_policy, repositoryName=name, policyText="{}") == (
        "InvalidParameterException",
        "Invalid parameter at 'PolicyText' failed to satisfy constraint: 'Invalid repository policy provided'", 400)


def test_tags_by_arn(ecr, name):
    arn = ecr.create_repository(repositoryName=name)["repository"]["repositoryArn"]
    ecr.tag_resource(resourceArn=arn, tags=[{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}])
    ecr.tag_resource(resourceArn=arn, tags=[{"Key": "a", "Value": "3"}])
    ecr.untag_resource(resourceArn=arn, tagKeys=["b", "never-set"])
    assert ecr.list_tags_for_resource(resourceArn=arn)["tags"] == [{"Key": "a", "Value": "3"}]
    assert error_of(ecr.list_tags_for_resource, resourceArn="not-an-arn") == (
        "InvalidParameterException", "Invalid parameter at 'resourceArn' failed to satisfy constraint: 'Invalid ARN'",
        400)
    assert error_of(ecr.tag_resource, resourceArn=f"{arn}-none", tags=[{"Key": "a", "Value": "1"}])[0] == \
        "RepositoryNotFoundException"


def test_images_are_never_there(ecr, name):
    ecr.create_repository(repositoryName=name)
    assert ecr.list_images(repositoryName=name)["imageIds"] == []
    assert ecr.describe_images(repositoryName=name)["imageDetails"] == []
    assert error_of(ecr.describe_images, repositoryName=name, imageIds=[{"imageTag": "latest"}]) == (
        "ImageNotFoundException",
        f"The image with imageId {{imageDigest:'null', imageTag:'latest'}} does not exist within the repository with "
        f"name '{name}' in the registry with id '{ACCOUNT}'", 400)
    assert error_of(ecr.list_images, repositoryName=f"{name}-none")[0] == "RepositoryNotFoundException"


def test_operations_that_need_a_registry_are_kinesims_501(ecr):
    for call, kwargs in ((ecr.get_authorization_token, {}),
                         (ecr.initiate_layer_upload, {"repositoryName": "any-repo"}),
                         (ecr.put_image, {"repositoryName": "any-repo", "imageManifest": "{}"})):
        code, message, status = error_of(call, **kwargs)
        assert (code, status) == ("NotImplementedException", 501)
        assert "kinesim has no container registry, so images cannot be pushed to or pulled from" in message


def test_describe_repositories_pages(ecr):
    prefix = f"paged-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}/r{i}" for i in range(5)]
    for repository in names:
        ecr.create_repository(repositoryName=repository)
    try:
        seen, token, pages = [], None, 0
        while True:
            page = ecr.describe_repositories(maxResults=2, **({"nextToken": token} if token else {}))
            assert len(page["repositories"]) <= 2
            seen += [r["repositoryName"] for r in page["repositories"]]
            pages += 1
            token = page.get("nextToken")
            if not token:
                break
        assert len(seen) == len(set(seen)) and set(names) <= set(seen) and pages >= 3
        # The paginator boto3 ships gives the same listing.
        listed = [r["repositoryName"] for p in ecr.get_paginator("describe_repositories").paginate(
            PaginationConfig={"PageSize": 3}) for r in p["repositories"]]
        assert listed == seen
        assert error_of(ecr.describe_repositories, nextToken="made-up")[0] == "InvalidParameterException"
    finally:
        for repository in names:
            ecr.delete_repository(repositoryName=repository)


def test_repositories_survive_a_restart(tmp_path_factory):
    first = start_server(tmp_path_factory)
    try:
        ecr = client_for(first.url, "ecr")
        arn = ecr.create_repository(repositoryName="kept", imageTagMutability="IMMUTABLE",
                                    tags=[{"Key": "k", "Value": "v"}])["repository"]["repositoryArn"]
        ecr.put_lifecycle_policy(repositoryName="kept", lifecyclePolicyText=LIFECYCLE)
        ecr.set_repository_policy(repositoryName="kept", policyText=POLICY)
    finally:
        first.stop()
    again = ServerProcess(first.settings).start()
    try:
        ecr = client_for(again.url, "ecr")
        assert ecr.describe_repositories(repositoryNames=["kept"])["repositories"][0]["imageTagMutability"] == \
            "IMMUTABLE"
        assert ecr.get_lifecycle_policy(repositoryName="kept")["lifecyclePolicyText"] == LIFECYCLE
        assert ecr.get_repository_policy(repositoryName="kept")["policyText"] == POLICY
        assert ecr.list_tags_for_resource(resourceArn=arn)["tags"] == [{"Key": "k", "Value": "v"}]
    finally:
        again.stop()
