"""`kinesim deploy` without a server: reading, linting and translating templates, intrinsic
functions, planning (dependency order, what to create / update / replace) and template errors."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import boto3
import pytest

from kinesim.deploy import cli
from kinesim.deploy.intrinsics import NO_VALUE, Resolver, pseudo_parameters
from kinesim.deploy.firehose_resources import FirehoseDeliveryStream
from kinesim.deploy.handlers import HANDLERS
from kinesim.deploy.kinesis_resources import KinesisStream
from kinesim.deploy.lambda_resources import EventSourceMapping, LambdaFunction, inline_package, package
from kinesim.deploy.resources import CLIENTS, Target, generated_name, target_for
from kinesim.deploy.s3_resources import S3Bucket
from kinesim.deploy.sam import BundledManagedPolicyLoader, translate
from kinesim.deploy.stack import check, creation_order, decide, deletion_order, stack_name_for
from kinesim.deploy.template import DeployError, TemplateError, lint, load_template, parameter_values
from kinesim.s3.objects import valid_bucket_name

ROOT = Path(__file__).resolve().parent.parent
ROOT_TEMPLATE = ROOT / "template.yaml"


def write(tmp_path: Path, text: str, name: str = "template.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def resolver_for(template: dict, parameters: dict | None = None) -> Resolver:
    return Resolver(template, parameters or {},
                    pseudo_parameters("eu-west-1", "123456789012", "shop", "arn:aws:cloudformation:eu-west-1:"
                                      "123456789012:stack/shop/1"))


def target(tmp_path: Path, region: str = "us-east-1", stack_name: str = "shop") -> Target:
    # Clients are made but never called: creating one opens no connection.
    session = boto3.Session(region_name=region, aws_access_key_id="t", aws_secret_access_key="t")
    clients = {name: session.client(name, endpoint_url="http://127.0.0.1:9") for name in CLIENTS}
    return target_for(clients, stack_name=stack_name, region=region, account_id="123456789012",
                      partition="aws-cn" if region.startswith("cn-") else "aws")


# Reading


def test_short_form_intrinsics_load_as_long_forms(tmp_path):
    path = write(tmp_path, """
Resources:
  S:
    Type: AWS::Kinesis::Stream
    Properties:
      Name: !Sub "${AWS::StackName}-s"
      ShardCount: !Ref Shards
      Tags: [{Key: arn, Value: !GetAtt Other.Arn}, {Key: z, Value: !Select [0, !Split [",", "a,b"]]}]
""")
    props = load_template(path)["Resources"]["S"]["Properties"]
    assert props["Name"] == {"Fn::Sub": "${AWS::StackName}-s"}
    assert props["ShardCount"] == {"Ref": "Shards"}
    assert props["Tags"][0]["Value"] == {"Fn::GetAtt": ["Other", "Arn"]}
    assert props["Tags"][1]["Value"] == {"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]}


def test_json_templates_load(tmp_path):
    path = write(tmp_path, json.dumps({"Resources": {"S": {"Type": "AWS::Kinesis::Stream"}}}), "t.json")
    assert load_template(path)["Resources"]["S"]["Type"] == "AWS::Kinesis::Stream"


@pytest.mark.parametrize("text, message", [
    ("Resources: [1, 2", "not valid YAML or JSON"),
    ("- a list", "must hold a mapping"),
    ("Parameters: {}", "At least one Resources member must be defined"),
])
def test_unreadable_templates_are_template_errors(tmp_path, text, message):
    with pytest.raises(TemplateError, match=message):
        load_template(write(tmp_path, text))


# Parameters


PARAMETERS = {"Parameters": {
    "Shards": {"Type": "Number", "Default": 2, "MinValue": 1, "MaxValue": 10},
    "Env": {"Type": "String", "AllowedValues": ["dev", "prod"]},
    "Zones": {"Type": "CommaDelimitedList", "Default": "a,b"},
    "Prefix": {"Type": "String", "Default": "ab", "AllowedPattern": "[a-z]+", "MaxLength": 5},
}}


def test_parameters_take_overrides_then_defaults_as_strings():
    assert parameter_values(PARAMETERS, {"Env": "dev"}) == {"Shards": "2", "Env": "dev", "Zones": ["a", "b"],
                                                             "Prefix": "ab"}
    assert parameter_values(PARAMETERS, {"Env": "prod", "Shards": "7"})["Shards"] == "7"


@pytest.mark.parametrize("overrides, message", [
    ({}, r"Parameters: \[Env\] must have values"),
    ({"Env": "dev", "Nope": "1"}, r"Parameters: \[Nope\] do not exist in the template"),
    ({"Env": "test"}, "Parameter 'Env' must be one of AllowedValues"),
    ({"Env": "dev", "Shards": "two"}, "Parameter 'Shards' must be a number"),
    ({"Env": "dev", "Shards": "0"}, "Parameter 'Shards' must be a number not less than 1"),
    ({"Env": "dev", "Shards": "11"}, "Parameter 'Shards' must be a number not greater than 10"),
    ({"Env": "dev", "Prefix": "AB"}, "Parameter 'Prefix' must match pattern"),
    ({"Env": "dev", "Prefix": "abcdef"}, "Parameter 'Prefix' cannot be longer than 5 characters"),
])
def test_parameter_constraints(overrides, message):
    with pytest.raises(TemplateError, match=message):
        parameter_values(PARAMETERS, overrides)


# Linting


def test_lint_names_resource_and_misspelt_property(tmp_path):
    path = write(tmp_path, """
Resources:
  Clicks:
    Type: AWS::Kinesis::Stream
    Properties:
      ShardCount: 1
      RetentionPeriodHourz: 48
""")
    errors = lint(path, "us-east-1")
    assert len(errors) == 1
    assert errors[0].startswith("resource Clicks, property RetentionPeriodHourz (template.yaml line 7):")
    assert "Did you mean 'RetentionPeriodHours'?" in errors[0]


def test_lint_reports_bad_getatt_and_unknown_type(tmp_path):
    path = write(tmp_path, """
Resources:
  Clicks:
    Type: AWS::Kinesis::Stream
  Thing:
    Type: AWS::Kinesis::Streamz
Outputs:
  Arn:
    Value: !GetAtt Clicks.Arnx
""")
    errors = "\n".join(lint(path, "us-east-1"))
    assert "resource Thing" in errors and "AWS::Kinesis::Streamz" in errors
    assert "output Arn" in errors and "'Arnx'" in errors


def test_lint_keeps_errors_only(tmp_path):
    # An unused parameter is a cfn-lint warning (W2001): not reported.
    path = write(tmp_path, """
Parameters:
  Unused: {Type: String, Default: x}
Resources:
  Clicks: {Type: AWS::Kinesis::Stream, Properties: {ShardCount: 1}}
""")
    assert lint(path, "us-east-1") == []


def test_root_template_lints_clean():
    assert lint(ROOT_TEMPLATE, "us-east-1") == []


# SAM transform


def in_s3(template: dict) -> dict:
    """The template as the server gets it: local CodeUri values uploaded (here: named) in S3."""
    template = json.loads(json.dumps(template))
    for resource in template["Resources"].values():
        properties = resource.get("Properties") or {}
        if resource["Type"] == "AWS::Serverless::Function" and isinstance(properties.get("CodeUri"), str):
            properties["CodeUri"] = f"s3://code/{properties['CodeUri'].strip('/')}"
    code = (template.get("Globals") or {}).get("Function", {}).get("CodeUri")
    if isinstance(code, str):
        template["Globals"]["Function"]["CodeUri"] = f"s3://code/{code}"
    return template


def test_sam_transform_of_the_root_template():
    template = load_template(ROOT_TEMPLATE)
    out = translate(in_s3(template), "us-east-1", parameter_values(template, {}))
    types = {lid: r["Type"] for lid, r in out["Resources"].items()}
    assert types == {
        "ClicksStream": "AWS::Kinesis::Stream", "ClicksEnrichedStream": "AWS::Kinesis::Stream",
        "EnrichFunction": "AWS::Lambda::Function", "EnrichFunctionRole": "AWS::IAM::Role",
        "EnrichFunctionClicks": "AWS::Lambda::EventSourceMapping",
        "ValidateFunction": "AWS::Lambda::Function", "ValidateFunctionRole": "AWS::IAM::Role",
        "ValidateFunctionClicks": "AWS::Lambda::EventSourceMapping", "ArchiveBucket": "AWS::S3::Bucket",
        "DeliveryRole": "AWS::IAM::Role", "ClicksToS3": "AWS::KinesisFirehose::DeliveryStream",
        "PageViewsStream": "AWS::Kinesis::Stream", "PageViewsBucket": "AWS::S3::Bucket",
        "PageViewsToS3": "AWS::KinesisFirehose::DeliveryStream"}
    enrich = out["Resources"]["EnrichFunction"]["Properties"]
    assert enrich["Code"] == {"S3Bucket": "code", "S3Key": "lambdas/enrich"}
    assert enrich["Handler"] == "app.handler" and enrich["Runtime"] == "python3.11"  # from Globals
    assert enrich["Role"] == {"Fn::GetAtt": ["EnrichFunctionRole", "Arn"]}
    mapping = out["Resources"]["ValidateFunctionClicks"]["Properties"]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["ClicksStream", "Arn"]}
    assert mapping["FunctionName"] == {"Ref": "ValidateFunction"}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["StartingPosition"] == "TRIM_HORIZON" and mapping["BatchSize"] == 100
    # Managed policies named by SAM resolved from the bundled map.
    assert "arn:aws:iam::aws:policy/service-role/AWSLambdaKinesisExecutionRole" in \
        out["Resources"]["EnrichFunctionRole"]["Properties"]["ManagedPolicyArns"]


def test_sam_code_uri_in_globals_and_a_region_of_another_partition(tmp_path):
    template = {"Transform": "AWS::Serverless-2016-10-31", "Globals": {"Function": {"CodeUri": "src"}},
                "Resources": {"F": {"Type": "AWS::Serverless::Function",
                                    "Properties": {"Handler": "app.handler", "Runtime": "python3.12",
                                                   "Policies": ["AWSLambdaKinesisExecutionRole"]}}}}
    out = translate(in_s3(template), "cn-north-1", {})
    assert out["Resources"]["F"]["Properties"]["Code"] == {"S3Bucket": "code", "S3Key": "src"}
    arns = out["Resources"]["FRole"]["Properties"]["ManagedPolicyArns"]
    assert all(arn.startswith("arn:aws-cn:iam::aws:policy/") for arn in arns)


def test_sam_transform_leaves_no_unpublished_metrics_warning(caplog):
    # The translator warned "There are unpublished metrics" once per translation, in the server log.
    import gc
    import logging
    template = load_template(ROOT_TEMPLATE)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            translate(in_s3(template), "us-east-1", parameter_values(template, {}))
        with pytest.raises(TemplateError):
            translate({"Transform": "AWS::Serverless-2016-10-31", "Resources": {"F": {
                "Type": "AWS::Serverless::Function", "Properties": {"Handler": "a.h", "Runtime": "python3.11"}}}},
                "us-east-1", {})
        gc.collect()
    assert not [r for r in caplog.records if "unpublished metrics" in r.getMessage()], caplog.text
    # Not by silencing the translator's logs: its other warnings still show.
    assert logging.getLogger("samtranslator.metrics.metrics").getEffectiveLevel() <= logging.WARNING
    assert not logging.getLogger("samtranslator.metrics.metrics").filters


def test_sam_builds_are_not_committed():
    # `sam build` writes .aws-sam/ beside the template: the repository's and the examples'.
    assert ".aws-sam/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    if (ROOT / ".git").exists() and shutil.which("git"):
        for path in (".aws-sam/build/template.yaml", "examples/cdk-uploads/.aws-sam/build.toml"):
            assert subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path]).returncode == 0, path


def test_bundled_managed_policy_loader_needs_no_iam():
    policies = BundledManagedPolicyLoader("aws").load()
    assert policies["AWSLambdaBasicExecutionRole"] == \
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def test_sam_errors_and_other_transforms(tmp_path):
    bad = {"Transform": "AWS::Serverless-2016-10-31", "Resources": {"F": {
        "Type": "AWS::Serverless::Function", "Properties": {"CodeUri": "src", "Handler": "a.h", "Runtime": "python3.11",
                                                           "Events": {"E": {"Type": "Kinesis", "Properties": {}}}}}}}
    with pytest.raises(TemplateError, match="SAM transform failed: .*F"):
        translate(in_s3(bad), "us-east-1", {})
    # A local path reaching the server: the translator's own refusal, as on AWS.
    with pytest.raises(TemplateError, match="SAM transform failed: .*CodeUri"):
        translate({**bad, "Resources": {"F": {**bad["Resources"]["F"], "Properties": {
            "CodeUri": "src", "Handler": "a.h", "Runtime": "python3.11"}}}}, "us-east-1", {})
    with pytest.raises(TemplateError, match="Transform AWS::LanguageExtensions is not supported"):
        translate({"Transform": ["AWS::LanguageExtensions"], "Resources": {}}, "us-east-1", {})
    plain = {"Resources": {"S": {"Type": "AWS::Kinesis::Stream"}}}
    assert translate(plain, "us-east-1", {}) is plain


# Intrinsic functions


def test_ref_parameters_pseudo_parameters_and_resources():
    r = resolver_for({"Resources": {"S": {"Type": "AWS::Kinesis::Stream"}}}, {"Env": "dev"})
    r.known("S", "shop-S-ABC", {"Arn": "arn:aws:kinesis:eu-west-1:123456789012:stream/shop-S-ABC"})
    assert r.resolve({"Ref": "Env"}) == "dev"
    assert r.resolve([{"Ref": "AWS::Region"}, {"Ref": "AWS::AccountId"}, {"Ref": "AWS::StackName"},
                      {"Ref": "AWS::Partition"}, {"Ref": "AWS::URLSuffix"}]) == \
        ["eu-west-1", "123456789012", "shop", "aws", "amazonaws.com"]
    assert r.resolve({"Ref": "S"}) == "shop-S-ABC"
    assert r.resolve({"Fn::GetAtt": ["S", "Arn"]}) == r.resolve({"Fn::GetAtt": "S.Arn"}) == \
        "arn:aws:kinesis:eu-west-1:123456789012:stream/shop-S-ABC"
    with pytest.raises(TemplateError, match=r"Unresolved resource dependencies \[Nope\]"):
        r.resolve({"Ref": "Nope"})
    with pytest.raises(TemplateError, match="resource S does not support attribute type Arnx in Fn::GetAtt"):
        r.resolve({"Fn::GetAtt": ["S", "Arnx"]})


def test_no_value_removes_the_property_or_item():
    r = resolver_for({"Resources": {}})
    assert r.resolve({"A": 1, "B": {"Ref": "AWS::NoValue"}, "C": [1, {"Ref": "AWS::NoValue"}, 2]}) == \
        {"A": 1, "C": [1, 2]}
    assert r.resolve({"Ref": "AWS::NoValue"}) is NO_VALUE


def test_sub_both_forms():
    r = resolver_for({"Resources": {}}, {"Env": "dev"})
    r.known("S", "clicks", {"Arn": "arn:s"})
    assert r.resolve({"Fn::Sub": "${AWS::StackName}-${Env}-${S}-${S.Arn}-${!Literal}"}) == \
        "shop-dev-clicks-arn:s-${Literal}"
    assert r.resolve({"Fn::Sub": ["${Name}/${Count}/${AWS::Region}", {"Name": {"Ref": "S"}, "Count": 3}]}) == \
        "clicks/3/eu-west-1"
    with pytest.raises(TemplateError, match=r"Unresolved resource dependencies \[Missing\]"):
        r.resolve({"Fn::Sub": "${Missing}"})


def test_join_select_split_findinmap_base64_getazs():
    r = resolver_for({"Resources": {}, "Mappings": {"Sizes": {"dev": {"Shards": 1}, "prod": {"Shards": 8}}}},
                     {"Zones": ["a", "b", "c"], "Env": "prod"})
    assert r.resolve({"Fn::Join": ["-", ["a", 1, {"Ref": "Env"}]]}) == "a-1-prod"
    assert r.resolve({"Fn::Join": [",", {"Ref": "Zones"}]}) == "a,b,c"
    assert r.resolve({"Fn::Select": ["1", {"Ref": "Zones"}]}) == "b"
    assert r.resolve({"Fn::Select": [0, {"Fn::Split": ["/", "x/y"]}]}) == "x"
    assert r.resolve({"Fn::FindInMap": ["Sizes", {"Ref": "Env"}, "Shards"]}) == 8
    assert r.resolve({"Fn::FindInMap": ["Sizes", "test", "Shards", {"DefaultValue": 2}]}) == 2
    assert r.resolve({"Fn::Base64": "hi"}) == "aGk="
    assert r.resolve({"Fn::GetAZs": ""}) == ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
    with pytest.raises(TemplateError, match="Fn::Select cannot select nonexistent value at index 5"):
        r.resolve({"Fn::Select": [5, ["a"]]})
    with pytest.raises(TemplateError, match="Unable to get mapping for Sizes::test::Shards"):
        r.resolve({"Fn::FindInMap": ["Sizes", "test", "Shards"]})


def test_conditions():
    template = {"Resources": {}, "Conditions": {
        "IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
        "IsDev": {"Fn::Not": [{"Condition": "IsProd"}]},
        "Big": {"Fn::And": [{"Condition": "IsProd"}, {"Fn::Equals": [{"Ref": "Shards"}, 8]}]},
        "Any": {"Fn::Or": [{"Condition": "IsDev"}, {"Condition": "Big"}]},
        "Loop": {"Fn::Not": [{"Condition": "Loop"}]},
    }}
    prod = resolver_for(template, {"Env": "prod", "Shards": "8"})
    assert [prod.condition(c) for c in ("IsProd", "IsDev", "Big", "Any")] == [True, False, True, True]
    assert prod.resolve({"Fn::If": ["IsProd", 8, 1]}) == 8
    dev = resolver_for(template, {"Env": "dev", "Shards": "8"})
    assert dev.resolve({"Fn::If": ["IsProd", 8, {"Ref": "AWS::NoValue"}]}) is NO_VALUE
    with pytest.raises(TemplateError, match="Circular dependency in condition Loop"):
        dev.condition("Loop")
    with pytest.raises(TemplateError, match="Unresolved condition dependency Nope"):
        dev.resolve({"Fn::If": ["Nope", 1, 2]})


def test_import_value_reads_other_stacks_exports():
    # AWS's text for an export no stack has (CreateChangeSet / CreateStack answer it).
    with pytest.raises(TemplateError, match="^No export named shared-stream-arn found.$"):
        resolver_for({"Resources": {}}).resolve({"Fn::ImportValue": "shared-stream-arn"})
    exports = {"shared-stream-arn": "arn:aws:kinesis:us-east-1:000000000000:stream/s"}
    resolver = Resolver({"Resources": {}}, {}, pseudo_parameters("us-east-1", "000000000000", "st", "id"), exports.get)
    with pytest.raises(TemplateError, match="^No export named shared-us-east-1 found.$"):
        resolver.resolve({"Fn::ImportValue": {"Fn::Sub": "shared-${AWS::Region}"}})
    assert resolver.resolve({"Fn::ImportValue": "shared-stream-arn"}) == exports["shared-stream-arn"]
    assert resolver.imported == {"shared-stream-arn"}


def test_references_follow_the_taken_branch_of_fn_if():
    template = {"Resources": {}, "Conditions": {"On": {"Fn::Equals": ["a", "a"]}}}
    r = resolver_for(template, {"Env": "dev"})
    value = {"A": {"Fn::Sub": "${Env}-${S}-${T.Arn}-${!X}"}, "B": {"Fn::If": ["On", {"Ref": "U"}, {"Ref": "V"}]},
             "C": {"Fn::Sub": ["${x}", {"x": {"Ref": "W"}}]}, "D": {"Ref": "AWS::Region"}}
    assert sorted(r.references(value), key=str) == sorted([("S", None), ("T", "Arn"), ("U", None), ("W", None)],
                                                          key=str)


# Planning


def prepared_root(tmp_path):
    template = load_template(ROOT_TEMPLATE)
    parameters = parameter_values(template, {})
    cfn = translate(in_s3(template), "us-east-1", parameters)
    return cfn, resolver_for(cfn, parameters)


def test_dependency_order_of_the_root_template(tmp_path):
    cfn, resolver = prepared_root(tmp_path)
    dependencies = check(cfn, resolver)
    assert dependencies["EnrichFunctionClicks"] == ["ClicksStream", "EnrichFunction"]
    assert dependencies["EnrichFunction"] == ["ClicksEnrichedStream", "EnrichFunctionRole"]
    assert dependencies["ClicksToS3"] == ["ArchiveBucket", "ClicksEnrichedStream", "DeliveryRole"]
    assert dependencies["DeliveryRole"] == ["ArchiveBucket", "ClicksEnrichedStream", "PageViewsBucket",
                                            "PageViewsStream"]
    assert dependencies["PageViewsToS3"] == ["DeliveryRole", "PageViewsBucket", "PageViewsStream"]
    order = creation_order(dependencies, list(dependencies))
    for before, after in [("ClicksStream", "EnrichFunctionClicks"), ("EnrichFunction", "EnrichFunctionClicks"),
                          ("ClicksEnrichedStream", "EnrichFunction"), ("EnrichFunctionRole", "EnrichFunction"),
                          ("ValidateFunction", "ValidateFunctionClicks")]:
        assert order.index(before) < order.index(after)
    records = {lid: {"DependsOn": deps} for lid, deps in dependencies.items()}
    assert deletion_order(records).index("EnrichFunctionClicks") < deletion_order(records).index("ClicksStream")


def test_depends_on_orders_and_cycles_are_errors():
    assert creation_order({"A": ["B"], "B": [], "C": ["A"]}, ["C", "A", "B"]) == ["B", "A", "C"]
    with pytest.raises(TemplateError, match=r"Circular dependency between resources: \[A, B\]"):
        creation_order({"A": ["B"], "B": ["A"]}, ["A", "B"])


def test_check_rejects_unsupported_types_naming_resource_and_type():
    template = {"Resources": {"Odd": {"Type": "AWS::Kinesis::Thing"}}}
    with pytest.raises(DeployError, match=r"^resource Odd: type AWS::Kinesis::Thing is not supported by kinesim "
                                          r"deploy \(of Kinesis: AWS::Kinesis::Channel, AWS::Kinesis::Stream"):
        check(template, resolver_for(template))


def test_check_names_every_problem_at_once_and_the_services_not_emulated():
    template = {"Resources": {
        "Table": {"Type": "AWS::DynamoDB::Table"},
        "Bus": {"Type": "AWS::Events::EventBus"},
        "Hook": {"Type": "Custom::Seed.Data", "Properties": {"ServiceToken": "x"}},
        "F": {"Type": "AWS::Lambda::Function", "Properties": {"Runtime": "java21", "Role": {"Ref": "Missing"}}}}}
    with pytest.raises(DeployError) as caught:
        check(template, resolver_for(template), runtimes=["python3.12", "nodejs22.x"])
    lines = str(caught.value).splitlines()
    assert lines[0] == "5 problems found before anything was created or changed:"
    assert lines[1].startswith("  resource Table: kinesim does not emulate Amazon DynamoDB: AWS::DynamoDB::Table ")
    assert lines[2].startswith("  resource Bus: kinesim does not emulate Amazon EventBridge: AWS::Events::EventBus ")
    assert lines[3].startswith("  Template format error: resource Hook: Invalid custom resource type Custom::Seed.Data")
    assert lines[4] == ("  Template format error: resource F, property Role: Unresolved resource dependencies [Missing] "
                        "in the Resources block of the template")
    assert lines[5].startswith("  resource F: Runtime java21 cannot run on this kinesim server (it runs python3.12, "
                               "nodejs22.x)")


def test_check_names_resource_and_property_of_a_bad_getatt():
    template = {"Resources": {
        "S": {"Type": "AWS::Kinesis::Stream"},
        "M": {"Type": "AWS::Lambda::EventSourceMapping",
              "Properties": {"FunctionName": "f", "EventSourceArn": {"Fn::GetAtt": ["S", "StreamArn"]}}}}}
    with pytest.raises(TemplateError, match="resource M, property EventSourceArn: resource S does not support "
                                            "attribute type StreamArn in Fn::GetAtt"):
        check(template, resolver_for(template))


def test_check_attribute_that_exists_but_kinesim_does_not_provide():
    template = {"Resources": {"S": {"Type": "AWS::Kinesis::Stream"}},
                "Outputs": {"W": {"Value": {"Fn::GetAtt": ["S", "WarmThroughputObject"]}}}}
    with pytest.raises(DeployError, match="output W: attribute WarmThroughputObject of AWS::Kinesis::Stream"):
        check(template, resolver_for(template))


def test_check_excludes_resources_whose_condition_is_false():
    template = {"Conditions": {"Off": {"Fn::Equals": ["a", "b"]}},
                "Resources": {"S": {"Type": "AWS::Kinesis::Stream", "Condition": "Off"},
                              "T": {"Type": "AWS::Kinesis::Stream", "Properties": {"Name": {"Ref": "S"}}}}}
    with pytest.raises(TemplateError, match=r"resource T, property Name: Unresolved resource dependencies \[S\]"):
        check(template, resolver_for(template))
    del template["Resources"]["T"]
    assert check(template, resolver_for(template)) == {}


def test_decide_create_unchanged_update_replace(tmp_path):
    streams = KinesisStream(target(tmp_path))
    current = streams.desired({"Name": "clicks", "ShardCount": "2"})
    record = {"Type": "AWS::Kinesis::Stream", "Properties": current}
    assert decide(streams, None, "AWS::Kinesis::Stream", current) == ("create", [])
    assert decide(streams, record, "AWS::Kinesis::Stream", streams.desired({"Name": "clicks", "ShardCount": 2})) == \
        ("unchanged", [])
    assert decide(streams, record, "AWS::Kinesis::Stream",
                  streams.desired({"Name": "clicks", "ShardCount": 3, "RetentionPeriodHours": 48})) == ("update", [])
    assert decide(streams, record, "AWS::Kinesis::Stream", streams.desired({"Name": "views", "ShardCount": 2})) == \
        ("replace", ["Name"])

    mappings = EventSourceMapping(target(tmp_path))
    base = {"FunctionName": "f", "EventSourceArn": "arn:s", "StartingPosition": "LATEST", "BatchSize": 10}
    record = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mappings.desired(base)}
    assert decide(mappings, record, record["Type"], mappings.desired({**base, "BatchSize": "50"})) == ("update", [])
    assert decide(mappings, record, record["Type"], mappings.desired({**base, "StartingPosition": "TRIM_HORIZON"})) \
        == ("replace", ["StartingPosition"])


# Resource handlers' desired properties


def test_stream_desired_defaults_and_types(tmp_path):
    streams = KinesisStream(target(tmp_path))
    assert streams.desired({}) == {"Name": None, "StreamMode": "PROVISIONED", "ShardCount": 1,
                                   "RetentionPeriodHours": 24, "StreamEncryption": None, "Tags": {},
                                   "DesiredShardLevelMetrics": [], "MaxRecordSizeInKiB": None}
    on_demand = streams.desired({"StreamModeDetails": {"StreamMode": "ON_DEMAND"}, "Tags": [{"Key": "a", "Value": 1}]})
    assert on_demand["ShardCount"] is None and on_demand["Tags"] == {"a": "1"}
    with pytest.raises(DeployError, match="property WarmThroughputMiBps of AWS::Kinesis::Stream is not supported"):
        streams.desired({"WarmThroughputMiBps": 10})
    with pytest.raises(DeployError, match="ShardCount must be an integer"):
        streams.desired({"ShardCount": "two"})


def test_function_desired_converts_to_the_api(tmp_path):
    functions = LambdaFunction(target(tmp_path))
    code = {"S3Bucket": "artifacts", "S3Key": "fn.zip"}
    desired = functions.desired({"Code": code, "Handler": "app.handler", "Runtime": "python3.11", "Role": "arn:r",
                                 "Timeout": "30", "KmsKeyArn": "arn:k",
                                 "Environment": {"Variables": {"N": 5, "B": True}},
                                 "Tags": [{"Key": "team", "Value": "data"}]})
    assert desired["Timeout"] == 30 and desired["KMSKeyArn"] == "arn:k"
    assert desired["Environment"] == {"Variables": {"N": "5", "B": "true"}}
    assert desired["Tags"] == {"team": "data"}
    assert desired["Code"] == code
    # Inline code is known by its zip's sha256: the same source gives the same hash, a change another.
    inline = functions.desired({"Code": {"ZipFile": "def handler(e, c):\n    return 1\n"}, "Runtime": "python3.11",
                                "Role": "arn:r"})["Code"]
    assert set(inline) == {"ZipSha256"}
    assert functions.desired({"Code": {"ZipFile": "def handler(e, c):\n    return 2\n"}, "Runtime": "python3.11",
                              "Role": "arn:r"})["Code"] != inline
    with pytest.raises(DeployError, match="property RuntimeManagementConfig of AWS::Lambda::Function is not supported"):
        functions.desired({"Code": code, "RuntimeManagementConfig": {"UpdateRuntimeOn": "Auto"}})
    # RecursiveLoop is set by PutFunctionRecursionConfig after CreateFunction
    assert functions.desired({"Code": code, "RecursiveLoop": "Allow"})["RecursiveLoop"] == "Allow"
    # The server reads no client's disk: a local path is refused, saying how code reaches it.
    with pytest.raises(DeployError, match="'fn' is a local path: upload the code to S3 first"):
        functions.desired({"Code": "fn"})


def test_mapping_desired_converts_to_the_api(tmp_path):
    mappings = EventSourceMapping(target(tmp_path))
    desired = mappings.desired({"FunctionName": "f", "EventSourceArn": "arn:s", "BatchSize": "25",
                                "BisectBatchOnFunctionError": "true", "Tags": [{"Key": "k", "Value": "v"}]})
    assert desired == {"FunctionName": "f", "EventSourceArn": "arn:s", "BatchSize": 25,
                       "BisectBatchOnFunctionError": True, "Tags": {"k": "v"}}
    with pytest.raises(DeployError, match="property Bogus of AWS::Lambda::EventSourceMapping is not supported"):
        mappings.desired({"Bogus": 1})


def test_delivery_stream_desired_converts_to_the_api(tmp_path):
    streams = FirehoseDeliveryStream(target(tmp_path))
    desired = streams.desired({
        "DeliveryStreamType": "KinesisStreamAsSource",
        "KinesisStreamSourceConfiguration": {"KinesisStreamARN": "arn:s", "RoleARN": "arn:r"},
        "ExtendedS3DestinationConfiguration": {
            "BucketARN": "arn:aws:s3:::b", "RoleARN": "arn:r",
            "BufferingHints": {"IntervalInSeconds": "60", "SizeInMBs": "64"},  # a Ref to a Number is a string
            "DynamicPartitioningConfiguration": {"Enabled": "true"}},
        "Tags": [{"Key": "team", "Value": "data"}]})
    assert desired == {
        "DeliveryStreamName": None, "DeliveryStreamType": "KinesisStreamAsSource",
        "KinesisStreamSourceConfiguration": {"KinesisStreamARN": "arn:s", "RoleARN": "arn:r"},
        "ExtendedS3DestinationConfiguration": {
            "BucketARN": "arn:aws:s3:::b", "RoleARN": "arn:r",
            "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 64},
            "DynamicPartitioningConfiguration": {"Enabled": True}},
        "Tags": {"team": "data"}}
    s3_destination = {"BucketARN": "a", "RoleARN": "r"}
    plain = streams.desired({"DeliveryStreamName": "d", "S3DestinationConfiguration": s3_destination})
    assert plain["DeliveryStreamType"] == "DirectPut" and plain["Tags"] == {}
    with pytest.raises(DeployError, match="RedshiftDestinationConfiguration of AWS::KinesisFirehose::DeliveryStream "
                                          "is not supported by kinesim deploy: kinesim delivers to Amazon S3 only"):
        streams.desired({"RedshiftDestinationConfiguration": {}})
    with pytest.raises(DeployError, match="property MSKSourceConfiguration of .* is not supported"):
        streams.desired({"MSKSourceConfiguration": {}, "S3DestinationConfiguration": s3_destination})
    for both_or_none in ({}, {"S3DestinationConfiguration": {}, "ExtendedS3DestinationConfiguration": {}}):
        with pytest.raises(DeployError, match="exactly one of ExtendedS3DestinationConfiguration and "
                                              "S3DestinationConfiguration is required"):
            streams.desired(both_or_none)


def test_delivery_stream_replaced_for_name_type_and_source_else_updated(tmp_path):
    streams = FirehoseDeliveryStream(target(tmp_path))
    base = {"DeliveryStreamName": "d", "DeliveryStreamType": "KinesisStreamAsSource",
            "KinesisStreamSourceConfiguration": {"KinesisStreamARN": "arn:one", "RoleARN": "arn:r"},
            "ExtendedS3DestinationConfiguration": {"BucketARN": "arn:aws:s3:::b", "RoleARN": "arn:r"}}
    record = {"Type": streams.type_name, "Properties": streams.desired(base)}

    def decision(**changes):
        return decide(streams, record, streams.type_name, streams.desired({**base, **changes}))

    assert decision() == ("unchanged", [])
    assert decision(DeliveryStreamName="e") == ("replace", ["DeliveryStreamName"])
    assert decision(DeliveryStreamType="DirectPut", KinesisStreamSourceConfiguration=None) == \
        ("replace", ["DeliveryStreamType", "KinesisStreamSourceConfiguration"])
    assert decision(KinesisStreamSourceConfiguration={"KinesisStreamARN": "arn:two", "RoleARN": "arn:r"}) == \
        ("replace", ["KinesisStreamSourceConfiguration"])
    assert decision(ExtendedS3DestinationConfiguration={"BucketARN": "arn:aws:s3:::c", "RoleARN": "arn:r"}) == \
        ("update", [])
    assert decision(Tags=[{"Key": "k", "Value": "v"}]) == ("update", [])
    assert decision(DeliveryStreamEncryptionConfigurationInput={"KeyType": "AWS_OWNED_CMK"}) == ("update", [])


def test_destination_update_unsets_what_the_template_left_out():
    old = {"BucketARN": "a", "RoleARN": "r", "Prefix": "p/!{partitionKeyFromQuery:k}/", "ErrorOutputPrefix": "e/",
           "CompressionFormat": "GZIP", "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 128},
           "DynamicPartitioningConfiguration": {"Enabled": True}, "FileExtension": ".jsonl",
           "S3BackupMode": "Enabled", "S3BackupConfiguration": {"BucketARN": "b", "RoleARN": "r", "Prefix": "bk/"}}
    new = {"BucketARN": "a", "RoleARN": "r", "Prefix": "q/!{partitionKeyFromQuery:k}/", "ErrorOutputPrefix": "e/",
           "BufferingHints": {"IntervalInSeconds": 30}, "DynamicPartitioningConfiguration": {"Enabled": True},
           "S3BackupMode": "Enabled", "S3BackupConfiguration": {"BucketARN": "b", "RoleARN": "r"}}
    assert FirehoseDeliveryStream.destination_update(old, new) == {
        "BucketARN": "a", "RoleARN": "r", "Prefix": "q/!{partitionKeyFromQuery:k}/", "ErrorOutputPrefix": "e/",
        "CompressionFormat": "UNCOMPRESSED", "FileExtension": "",
        # UpdateDestination merges hints member by member: both go, the default filled in (64
        # MiB with dynamic partitioning).
        "BufferingHints": {"IntervalInSeconds": 30, "SizeInMBs": 64},
        "DynamicPartitioningConfiguration": {"Enabled": True}, "S3BackupMode": "Enabled",
        "S3BackupUpdate": {"BucketARN": "b", "RoleARN": "r", "Prefix": "",
                           "BufferingHints": {"IntervalInSeconds": 300, "SizeInMBs": 5}}}
    unpartitioned = FirehoseDeliveryStream.destination_update({"BucketARN": "a", "RoleARN": "r"},
                                                              {"BucketARN": "a", "RoleARN": "r"})
    assert unpartitioned["BufferingHints"] == {"IntervalInSeconds": 300, "SizeInMBs": 5}
    # The backup configuration removed: backup off.
    assert FirehoseDeliveryStream.destination_update(old, {"BucketARN": "a", "RoleARN": "r"})["S3BackupMode"] == \
        "Disabled"


def test_bucket_desired_names_and_attributes(tmp_path):
    buckets = S3Bucket(target(tmp_path, stack_name="Shop-Prod"))
    assert buckets.desired({"BucketName": "clicks-archive"}) == {"BucketName": "clicks-archive"}
    assert buckets.desired({}) == {"BucketName": None}
    with pytest.raises(DeployError, match="property WebsiteConfiguration of AWS::S3::Bucket is not supported"):
        buckets.desired({"WebsiteConfiguration": {"IndexDocument": "index.html"}})
    record = {"Type": "AWS::S3::Bucket", "Properties": buckets.desired({"BucketName": "a-bucket"})}
    assert decide(buckets, record, "AWS::S3::Bucket", buckets.desired({"BucketName": "b-bucket"})) == \
        ("replace", ["BucketName"])
    # CloudFormation's generated bucket names: stack-logicalid-suffix, lower case, at most 63 characters.
    name = buckets.generate_name("ArchiveBucket")
    assert re.fullmatch(r"shop-prod-archivebucket-[a-z0-9]{12}", name) and valid_bucket_name(name)
    long = S3Bucket(target(tmp_path, stack_name="S" * 100)).generate_name("L" * 100)
    assert len(long) == 63 and long == long.lower() and valid_bucket_name(long)
    assert buckets.bucket_attributes("b") == {
        "Arn": "arn:aws:s3:::b", "DomainName": "b.s3.amazonaws.com",
        "RegionalDomainName": "b.s3.us-east-1.amazonaws.com",
        "DualStackDomainName": "b.s3.dualstack.us-east-1.amazonaws.com"}
    china = S3Bucket(target(tmp_path, region="cn-north-1")).bucket_attributes("b")
    assert china["Arn"] == "arn:aws-cn:s3:::b" and china["RegionalDomainName"] == "b.s3.cn-north-1.amazonaws.com.cn"
    assert set(buckets.bucket_attributes("b")) == S3Bucket.attributes


def test_check_bucket_and_delivery_stream_attributes():
    template = {"Resources": {"B": {"Type": "AWS::S3::Bucket"},
                              "D": {"Type": "AWS::KinesisFirehose::DeliveryStream",
                                    "Properties": {"S3DestinationConfiguration": {
                                        "BucketARN": {"Fn::GetAtt": ["B", "Arn"]}, "RoleARN": "r"}}}},
                "Outputs": {"A": {"Value": {"Fn::GetAtt": ["D", "Arn"]}},
                            "N": {"Value": {"Fn::GetAtt": ["B", "RegionalDomainName"]}}}}
    assert check(template, resolver_for(template)) == {"B": [], "D": ["B"]}
    template["Outputs"]["W"] = {"Value": {"Fn::GetAtt": ["B", "WebsiteURL"]}}
    with pytest.raises(DeployError, match="output W: attribute WebsiteURL of AWS::S3::Bucket .* is not provided by "
                                          "kinesim deploy"):
        check(template, resolver_for(template))


def test_packages_are_deterministic_and_skip_bytecode(tmp_path):
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "app.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "mod.py").write_text("y = 2\n")
    (tmp_path / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    first = package(tmp_path)
    assert package(tmp_path) == first
    assert zipfile.ZipFile(io.BytesIO(first)).namelist() == ["app.py", "pkg/mod.py"]
    inline = zipfile.ZipFile(io.BytesIO(inline_package("def handler(e, c): pass", "python3.12")))
    assert inline.namelist() == ["index.py", "cfnresponse/__init__.py"]  # as CloudFormation zips it
    with pytest.raises(DeployError, match="inline code"):
        inline_package("x", "java21")


def test_generated_names_follow_cloudformation():
    name = generated_name("shop", "ClicksStream", 64)
    assert name.startswith("shop-ClicksStream-") and len(name) == len("shop-ClicksStream-") + 12
    assert len(generated_name("s" * 100, "L" * 100, 64)) == 64
    # Others join as services are added.
    assert set(HANDLERS) >= {"AWS::Kinesis::Stream", "AWS::Lambda::Function", "AWS::Lambda::EventSourceMapping",
                             "AWS::Lambda::Permission", "AWS::KinesisFirehose::DeliveryStream", "AWS::S3::Bucket",
                             "AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}


# Command line


def test_stack_name_defaults_to_the_template_directory(tmp_path):
    assert stack_name_for(ROOT_TEMPLATE) == stack_name_for(ROOT_TEMPLATE.parent / "x.yaml")
    (tmp_path / "my_app.v2").mkdir()
    assert stack_name_for(tmp_path / "my_app.v2" / "template.yaml") == "my-app-v2"
    (tmp_path / "2024").mkdir()
    assert stack_name_for(tmp_path / "2024" / "template.yaml") == "stack-2024"


def test_parameter_overrides_both_forms():
    assert cli.parse_overrides(["A=1", "B=x=y", "ParameterKey=C,ParameterValue=3"]) == {"A": "1", "B": "x=y", "C": "3"}
    with pytest.raises(DeployError, match="KEY=VALUE"):
        cli.parse_overrides(["A"])


def test_help_explains_the_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for words in ("--stack-name", "--parameter-overrides", "--endpoint-url", "AWS_ENDPOINT_URL", "--delete",
                  "--no-lint", "--region", "updates the stack in place"):
        assert words in text


def test_invalid_stack_name_is_rejected_before_any_call(capsys):
    assert cli.main([str(ROOT_TEMPLATE), "--stack-name", "bad_name", "--endpoint-url", "http://127.0.0.1:9"]) == 1
    assert "Value 'bad_name' at 'stackName' failed to satisfy constraint" in capsys.readouterr().err


def test_unreachable_server_is_a_clear_error(capsys):
    assert cli.main([str(ROOT_TEMPLATE), "--endpoint-url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach kinesim at http://127.0.0.1:9" in capsys.readouterr().err
