"""The template's Rules section (kinesim.deploy.rules.check_rules): rule conditions, assertions and
the rule functions, evaluated over parameter values as CloudFormation evaluates them; a failed
assertion is a TemplateError carrying its AssertDescription."""
from __future__ import annotations

import pytest

from kinesim.deploy.rules import check_rules
from kinesim.deploy.template import TemplateError, parameter_values

# What every CDK app's template carries (aws-cdk-lib's DefaultStackSynthesizer).
CDK_RULE = {"CheckBootstrapVersion": {"Assertions": [{
    "Assert": {"Fn::Not": [{"Fn::Contains": [["1", "2", "3", "4", "5"], {"Ref": "BootstrapVersion"}]}]},
    "AssertDescription": "CDK bootstrap stack version 6 required. Please run 'cdk bootstrap' with a recent "
                         "version of the CDK CLI."}]}}

# The User Guide's example ("Conditionally verify a parameter value").
INSTANCE_RULES = {
    "testInstanceType": {
        "RuleCondition": {"Fn::Equals": [{"Ref": "Environment"}, "test"]},
        "Assertions": [{"Assert": {"Fn::Contains": [["a1.medium"], {"Ref": "InstanceType"}]},
                        "AssertDescription": "For a test environment, the instance type must be a1.medium"}]},
    "prodInstanceType": {
        "RuleCondition": {"Fn::Equals": [{"Ref": "Environment"}, "prod"]},
        "Assertions": [{"Assert": {"Fn::Contains": [["a1.large"], {"Ref": "InstanceType"}]},
                        "AssertDescription": "For a production environment, the instance type must be a1.large"}]},
}


def failure(template: dict, parameters: dict, pseudo: dict | None = None) -> str:
    with pytest.raises(TemplateError) as caught:
        check_rules(template, parameters, pseudo)
    return str(caught.value)


def test_cdk_bootstrap_version_rule_passes_for_recent_versions():
    for version in ("6", "21", "33", 33):
        check_rules({"Rules": CDK_RULE}, {"BootstrapVersion": version})


def test_cdk_bootstrap_version_rule_refuses_old_versions_with_its_description():
    for version in ("1", "5", 5):
        assert failure({"Rules": CDK_RULE}, {"BootstrapVersion": version}) == (
            "CDK bootstrap stack version 6 required. Please run 'cdk bootstrap' with a recent version of the CDK CLI.")


def test_contains_matches_whole_values_not_substrings():
    # aws-cdk issue 17942 feared "15" would match "1": Fn::Contains compares whole strings.
    check_rules({"Rules": CDK_RULE}, {"BootstrapVersion": "15"})


def test_rule_condition_decides_whether_the_assertions_apply():
    template = {"Rules": INSTANCE_RULES}
    check_rules(template, {"Environment": "test", "InstanceType": "a1.medium"})
    check_rules(template, {"Environment": "prod", "InstanceType": "a1.large"})
    check_rules(template, {"Environment": "dev", "InstanceType": "anything"})  # no rule applies
    assert failure(template, {"Environment": "test", "InstanceType": "a1.large"}) == \
        "For a test environment, the instance type must be a1.medium"
    assert failure(template, {"Environment": "prod", "InstanceType": "a1.medium"}) == \
        "For a production environment, the instance type must be a1.large"


def test_first_failing_assertion_of_a_rule_is_reported():
    # The User Guide's ValidateHostedZone rule: two assertions, both about empty parameters.
    rules = {"ValidateHostedZone": {
        "RuleCondition": {"Fn::Equals": [{"Ref": "UseSSL"}, "Yes"]},
        "Assertions": [
            {"Assert": {"Fn::Not": [{"Fn::Equals": [{"Ref": "ALBSSLCertificateARN"}, ""]}]},
             "AssertDescription": "ACM Certificate value cannot be empty if SSL is required"},
            {"Assert": {"Fn::Not": [{"Fn::Equals": [{"Ref": "HostedZoneName"}, ""]}]},
             "AssertDescription": "Route53 Hosted Zone Name is mandatory when SSL is required"}]}}
    template = {"Rules": rules}
    assert failure(template, {"UseSSL": "Yes", "ALBSSLCertificateARN": "", "HostedZoneName": ""}) == \
        "ACM Certificate value cannot be empty if SSL is required"
    assert failure(template, {"UseSSL": "Yes", "ALBSSLCertificateARN": "arn:cert", "HostedZoneName": ""}) == \
        "Route53 Hosted Zone Name is mandatory when SSL is required"
    check_rules(template, {"UseSSL": "Yes", "ALBSSLCertificateARN": "arn:cert", "HostedZoneName": "example.com"})
    check_rules(template, {"UseSSL": "No", "ALBSSLCertificateARN": "", "HostedZoneName": ""})


def test_and_or_each_member_functions():
    def holds(expr, **parameters) -> bool:
        try:
            check_rules({"Rules": {"R": {"Assertions": [{"Assert": expr, "AssertDescription": "no"}]}}}, parameters)
            return True
        except TemplateError as err:
            assert str(err) == "no"
            return False

    both = {"Fn::And": [{"Fn::Equals": [{"Ref": "A"}, "x"]}, {"Fn::Equals": [{"Ref": "B"}, "y"]}]}
    either = {"Fn::Or": [{"Fn::Equals": [{"Ref": "A"}, "x"]}, {"Fn::Equals": [{"Ref": "B"}, "y"]}]}
    assert holds(both, A="x", B="y") and not holds(both, A="x", B="z")
    assert holds(either, A="q", B="y") and not holds(either, A="q", B="z")
    assert holds({"Fn::EachMemberEquals": [{"Ref": "L"}, "IT"]}, L=["IT", "IT"])
    assert not holds({"Fn::EachMemberEquals": [{"Ref": "L"}, "IT"]}, L=["IT", "HR"])
    assert holds({"Fn::EachMemberIn": [{"Ref": "L"}, ["a", "b", "c"]]}, L=["a", "c"])
    assert not holds({"Fn::EachMemberIn": [{"Ref": "L"}, ["a", "b"]]}, L=["a", "c"])
    # Numbers in a template's lists compare as the strings CloudFormation makes of them.
    assert holds({"Fn::Contains": [[1, 2, 3], {"Ref": "N"}]}, N="2")


def test_comma_delimited_list_parameters_are_lists():
    template = {"Parameters": {"Zones": {"Type": "CommaDelimitedList", "Default": "a,b"}},
                "Rules": {"R": {"Assertions": [{"Assert": {"Fn::EachMemberIn": [{"Ref": "Zones"}, ["a", "b"]]},
                                                "AssertDescription": "zones must be a or b"}]}}}
    check_rules(template, parameter_values(template, {}))
    assert failure(template, parameter_values(template, {"Zones": "a,c"})) == "zones must be a or b"


def test_if_uses_the_templates_conditions_and_pseudo_parameters_resolve():
    template = {"Parameters": {"Env": {"Type": "String"}},
                "Conditions": {"IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}},
                "Rules": {"OnlyUsEast1": {"Assertions": [
                    {"Assert": {"Fn::Equals": [{"Ref": "AWS::Region"},
                                               {"Fn::If": ["IsProd", "us-east-1", {"Ref": "AWS::Region"}]}]},
                     "AssertDescription": "prod stacks go to us-east-1"}]}}}
    check_rules(template, {"Env": "dev"}, {"AWS::Region": "eu-west-1"})
    check_rules(template, {"Env": "prod"}, {"AWS::Region": "us-east-1"})
    assert failure(template, {"Env": "prod"}, {"AWS::Region": "eu-west-1"}) == "prod stacks go to us-east-1"


def test_template_without_rules_passes():
    check_rules({"Resources": {}}, {})


def test_malformed_rules_are_template_errors():
    assert "must have an Assertions list" in failure({"Rules": {"R": {"RuleCondition": True}}}, {})
    assert "must have an Assert" in failure({"Rules": {"R": {"Assertions": [{"AssertDescription": "x"}]}}}, {})
    assert "requires a list of 2 to 10 conditions" in failure(
        {"Rules": {"R": {"Assertions": [{"Assert": {"Fn::And": [True]}}]}}}, {})
    assert "Fn::Sub is not a rule function" in failure(
        {"Rules": {"R": {"Assertions": [{"Assert": {"Fn::Sub": "x"}}]}}}, {})
    assert "Unresolved resource dependencies [Nope]" in failure(
        {"Rules": {"R": {"Assertions": [{"Assert": {"Fn::Equals": [{"Ref": "Nope"}, "x"]}}]}}}, {})
    assert "must evaluate to true or false" in failure({"Rules": {"R": {"Assertions": [{"Assert": "maybe"}]}}}, {})


def test_assertion_without_description_names_the_rule():
    assert failure({"Rules": {"Mine": {"Assertions": [{"Assert": {"Fn::Equals": ["a", "b"]}}]}}}, {}) == \
        "Template error: assertion 1 of rule Mine failed"


def test_ec2_reading_functions_are_refused_with_the_reason():
    template = {"Rules": {"SubnetsInVPC": {"Assertions": [{
        "Assert": {"Fn::EachMemberIn": [{"Fn::ValueOfAll": ["AWS::EC2::Subnet::Id", "VpcId"]},
                                        {"Fn::RefAll": "AWS::EC2::VPC::Id"}]},
        "AssertDescription": "All subnets must in the VPC"}]}}}
    message = failure(template, {})
    assert "Fn::ValueOfAll" in message and "kinesim does not emulate EC2" in message
