"""Resource-based policy evaluation (kinesim/iam/evaluate.py): the rules AWS documents, on plain
documents, no server."""
from __future__ import annotations

import json
import random

import pytest

from kinesim.iam.evaluate import Caller, allows, denied_message, evaluate

OWNER, OTHER, THIRD = "111111111111", "222222222222", "333333333333"
STREAM = f"arn:aws:kinesis:us-east-1:{OWNER}:stream/orders"
QUEUE = f"arn:aws:sqs:us-east-1:{OWNER}:jobs"
ROLE = f"arn:aws:iam::{OTHER}:role/team/Reader"

ROOT = Caller(OTHER, f"arn:aws:iam::{OTHER}:root")
USER = Caller(OTHER, f"arn:aws:iam::{OTHER}:user/alice")
SESSION = Caller(OTHER, f"arn:aws:sts::{OTHER}:assumed-role/Reader/s1", role_arn=ROLE)
SESSION2 = Caller(OTHER, f"arn:aws:sts::{OTHER}:assumed-role/Reader/s2", role_arn=ROLE)
STRANGER = Caller(THIRD, f"arn:aws:iam::{THIRD}:user/mallory")


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(principal=None, action="kinesis:*", resource=STREAM, **extra) -> dict:
    return {"Effect": "Allow", "Principal": principal or {"AWS": OTHER}, "Action": action,
            "Resource": resource, **extra}


def deny(principal=None, action="kinesis:*", resource=STREAM, **extra) -> dict:
    return {**allow(principal, action, resource, **extra), "Effect": "Deny"}


# --- the decision -------------------------------------------------------------------------

def test_no_policy_and_no_matching_statement_are_implicit_denies():
    assert evaluate(None, USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"
    assert evaluate(policy(), USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"
    assert evaluate(policy(allow(action="kinesis:GetRecords")), USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"


def test_an_allow_allows():
    assert evaluate(policy(allow()), USER, "kinesis:PutRecord", STREAM) == "Allow"
    assert allows(policy(allow()), USER, "kinesis:PutRecord", STREAM)


def test_explicit_deny_beats_allow_in_either_order():
    for statements in ([allow(), deny(action="kinesis:PutRecord")], [deny(action="kinesis:PutRecord"), allow()]):
        assert evaluate(policy(*statements), USER, "kinesis:PutRecord", STREAM) == "Deny"
        assert not allows(policy(*statements), USER, "kinesis:PutRecord", STREAM)
    # The deny covers PutRecord only: other actions stay allowed.
    assert evaluate(policy(allow(), deny(action="kinesis:PutRecord")), USER, "kinesis:GetRecords", STREAM) == "Allow"


def test_a_deny_alone_is_explicit():
    assert evaluate(policy(deny()), USER, "kinesis:PutRecord", STREAM) == "Deny"


def test_statement_as_a_single_object_and_policy_as_json_text():
    doc = {"Version": "2012-10-17", "Statement": allow()}
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM) == "Allow"
    assert evaluate(json.dumps(doc), USER, "kinesis:PutRecord", STREAM) == "Allow"
    assert evaluate(json.dumps(doc).encode(), USER, "kinesis:PutRecord", STREAM) == "Allow"


def test_an_unknown_effect_is_ignored():
    assert evaluate(policy({**allow(), "Effect": "allow"}), USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"
    assert evaluate(policy({**deny(), "Effect": "Maybe"}, allow()), USER, "kinesis:PutRecord", STREAM) == "Allow"


@pytest.mark.parametrize("doc", [
    "{not json", "", "[]", "null", "42", '"text"', 42, [allow()], {"Statement": 7}, {"Statement": [1, "x", None]},
    {"Version": "2012-10-17"}, "[" * 100_000, b"\xff\xfe",
    policy({**allow(), "Principal": 5}), policy({**allow(), "Principal": {"AWS": {"x": 1}}}),
    policy({**allow(), "Action": {"kinesis": "*"}}), policy({**allow(), "Resource": [STREAM, None]}),
    policy({**allow(), "Condition": "aws:SourceAccount"}), policy({**allow(), "Condition": {"StringEquals": 1}}),
    policy({**allow(), "Condition": {"StringEquals": {"aws:SourceAccount": {"a": 1}}}}),
])
def test_a_malformed_policy_is_an_implicit_deny_and_never_raises(doc):
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM, {"aws:SourceAccount": OTHER}) == "ImplicitDeny"


def test_an_ill_typed_not_element_does_not_make_a_statement_apply_everywhere():
    doc = policy({"Effect": "Allow", "Principal": "*", "NotAction": {"x": 1}, "Resource": "*"})
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"


def test_statements_without_principal_or_action_apply_to_nobody():
    no_principal = {k: v for k, v in allow().items() if k != "Principal"}
    no_action = {k: v for k, v in allow().items() if k != "Action"}
    assert evaluate(policy(no_principal, no_action), USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"


# --- principals ---------------------------------------------------------------------------

@pytest.mark.parametrize("principal", ["*", {"AWS": "*"}, {"AWS": [THIRD, "*"]}])
def test_everyone(principal):
    for caller in (ROOT, USER, SESSION, STRANGER):
        assert allows(policy(allow(principal)), caller, "kinesis:PutRecord", STREAM)


@pytest.mark.parametrize("principal", [{"AWS": OTHER}, {"AWS": f"arn:aws:iam::{OTHER}:root"}, {"AWS": [OWNER, OTHER]},
                                       {"AWS": [f"arn:aws:iam::{OTHER}:root"]}, OTHER])
def test_an_account_id_or_root_arn_names_every_principal_of_the_account(principal):
    for caller in (ROOT, USER, SESSION):
        assert allows(policy(allow(principal)), caller, "kinesis:PutRecord", STREAM), caller
    assert not allows(policy(allow(principal)), STRANGER, "kinesis:PutRecord", STREAM)


def test_a_user_arn_names_that_user_only():
    doc = policy(allow({"AWS": USER.arn}))
    assert allows(doc, USER, "kinesis:PutRecord", STREAM)
    assert not allows(doc, Caller(OTHER, f"arn:aws:iam::{OTHER}:user/bob"), "kinesis:PutRecord", STREAM)
    assert not allows(doc, ROOT, "kinesis:PutRecord", STREAM)
    assert not allows(doc, SESSION, "kinesis:PutRecord", STREAM)


def test_a_role_arn_names_its_assumed_role_sessions():
    doc = policy(allow({"AWS": ROLE}))
    assert allows(doc, SESSION, "kinesis:PutRecord", STREAM)
    assert allows(doc, SESSION2, "kinesis:PutRecord", STREAM)
    assert allows(doc, Caller(OTHER, ROLE), "kinesis:PutRecord", STREAM)  # the role ARN as the caller itself
    assert not allows(doc, ROOT, "kinesis:PutRecord", STREAM)
    assert not allows(doc, USER, "kinesis:PutRecord", STREAM)
    # The path is part of the role's ARN.
    assert not allows(policy(allow({"AWS": f"arn:aws:iam::{OTHER}:role/Reader"})), SESSION, "kinesis:PutRecord", STREAM)
    other_role = Caller(OTHER, f"arn:aws:sts::{OTHER}:assumed-role/Writer/s1",
                        role_arn=f"arn:aws:iam::{OTHER}:role/team/Writer")
    assert not allows(doc, other_role, "kinesis:PutRecord", STREAM)


def test_an_assumed_role_session_arn_names_that_session():
    doc = policy(allow({"AWS": SESSION.arn}))
    assert allows(doc, SESSION, "kinesis:PutRecord", STREAM)
    assert not allows(doc, SESSION2, "kinesis:PutRecord", STREAM)


def test_a_service_principal_matches_the_context_principal_service():
    doc = policy(allow({"Service": ["sns.amazonaws.com", "events.amazonaws.com"]}, action="sqs:SendMessage",
                       resource=QUEUE))
    assert allows(doc, USER, "sqs:SendMessage", QUEUE, {"aws:PrincipalService": "sns.amazonaws.com"})
    assert allows(doc, USER, "sqs:SendMessage", QUEUE, {"AWS:principalservice": "events.amazonaws.com"})
    assert not allows(doc, USER, "sqs:SendMessage", QUEUE, {"aws:PrincipalService": "s3.amazonaws.com"})
    assert not allows(doc, USER, "sqs:SendMessage", QUEUE)
    # Both kinds in one Principal: either matches.
    both = policy(allow({"Service": "sns.amazonaws.com", "AWS": THIRD}, action="sqs:*", resource=QUEUE))
    assert allows(both, STRANGER, "sqs:SendMessage", QUEUE)
    assert allows(both, USER, "sqs:SendMessage", QUEUE, {"aws:PrincipalService": "sns.amazonaws.com"})


def test_other_principal_kinds_match_no_caller():
    doc = policy(allow({"Federated": "cognito-identity.amazonaws.com", "CanonicalUser": "abc"}))
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM) == "ImplicitDeny"


def test_not_principal():
    # Deny everyone but the owner's account (the allow lets OTHER in, the deny then shuts it out).
    doc = policy(allow("*"),
                 {"Effect": "Deny", "NotPrincipal": {"AWS": OWNER}, "Action": "kinesis:*", "Resource": STREAM})
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM) == "Deny"
    assert evaluate(doc, Caller(OWNER, f"arn:aws:iam::{OWNER}:user/me"), "kinesis:PutRecord", STREAM) == "Allow"
    only_others = policy({"Effect": "Allow", "NotPrincipal": {"AWS": [ROLE]}, "Action": "kinesis:*"})
    assert not allows(only_others, SESSION, "kinesis:PutRecord", STREAM)
    assert allows(only_others, USER, "kinesis:PutRecord", STREAM)


# --- actions ------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["kinesis:PutRecord", "kinesis:putrecord", "Kinesis:PUTRECORD", "kinesis:*",
                                     "kinesis:Put*", "kinesis:*Record", "kinesis:P?tRecord", "*", "*:PutRecord",
                                     ["kinesis:GetRecords", "kinesis:Put*"]])
def test_actions_matching(pattern):
    assert allows(policy(allow(action=pattern)), USER, "kinesis:PutRecord", STREAM)


@pytest.mark.parametrize("pattern", ["kinesis:PutRecords", "kinesis:Get*", "sqs:*", "kinesis:PutRecord?",
                                     "kinesis:?PutRecord", "kinesis", "kinesis:", [], ["kinesis:GetRecords"]])
def test_actions_not_matching(pattern):
    assert not allows(policy(allow(action=pattern)), USER, "kinesis:PutRecord", STREAM)


def test_sns_actions_are_matched_whatever_their_case():
    topic = f"arn:aws:sns:us-east-1:{OWNER}:alerts"
    doc = policy(allow(action=["SNS:Publish", "SNS:Subscribe"], resource=topic))
    assert allows(doc, USER, "sns:Publish", topic)
    assert allows(doc, USER, "SNS:Subscribe", topic)


def test_not_action():
    doc = policy({"Effect": "Allow", "Principal": {"AWS": OTHER}, "NotAction": ["kinesis:Delete*", "kinesis:*Policy"],
                  "Resource": STREAM})
    assert allows(doc, USER, "kinesis:PutRecord", STREAM)
    assert allows(doc, USER, "sqs:SendMessage", STREAM)  # NotAction covers every other service too
    assert not allows(doc, USER, "kinesis:DeleteStream", STREAM)
    assert not allows(doc, USER, "kinesis:PutResourcePolicy", STREAM)
    deny_all_but_reads = policy(allow(),
                                {"Effect": "Deny", "Principal": "*", "NotAction": "kinesis:Get*", "Resource": "*"})
    assert evaluate(deny_all_but_reads, USER, "kinesis:PutRecord", STREAM) == "Deny"
    assert evaluate(deny_all_but_reads, USER, "kinesis:GetRecords", STREAM) == "Allow"


# --- resources ----------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", [
    STREAM, "*", f"arn:aws:kinesis:*:{OWNER}:stream/*", "arn:aws:kinesis:us-east-1:*:stream/ord*",
    f"arn:aws:kinesis:us-east-1:{OWNER}:stream/order?", "arn:*/orders", [QUEUE, f"arn:aws:kinesis:us-east-1:{OWNER}:*"],
])
def test_resources_matching(pattern):
    assert allows(policy(allow(resource=pattern)), USER, "kinesis:PutRecord", STREAM)


@pytest.mark.parametrize("pattern", [
    f"arn:aws:kinesis:us-east-1:{OWNER}:stream/ORDERS", f"arn:aws:kinesis:us-east-1:{OWNER}:stream/order",
    f"arn:aws:kinesis:us-east-1:{OWNER}:stream/orders?", f"arn:aws:kinesis:us-west-2:{OWNER}:stream/*",
    f"arn:aws:kinesis:us-east-1:{OTHER}:stream/orders", QUEUE, [],
])
def test_resources_not_matching(pattern):
    assert not allows(policy(allow(resource=pattern)), USER, "kinesis:PutRecord", STREAM)


def test_a_consumer_arn_is_matched_by_a_stream_prefix_wildcard():
    consumer = f"{STREAM}/consumer/app:1700000000"
    assert allows(policy(allow(resource=f"{STREAM}/consumer/*")), USER, "kinesis:SubscribeToShard", consumer)
    assert not allows(policy(allow(resource=STREAM)), USER, "kinesis:SubscribeToShard", consumer)


def test_missing_resource_applies_to_every_resource():
    doc = policy({k: v for k, v in allow().items() if k != "Resource"})
    assert allows(doc, USER, "kinesis:PutRecord", STREAM)
    assert allows(doc, USER, "kinesis:PutRecord", QUEUE)


def test_not_resource():
    doc = policy({**{k: v for k, v in allow().items() if k != "Resource"},
                  "NotResource": "arn:aws:kinesis:*:*:stream/secret-*"})
    assert allows(doc, USER, "kinesis:PutRecord", STREAM)
    assert not allows(doc, USER, "kinesis:PutRecord", f"arn:aws:kinesis:us-east-1:{OWNER}:stream/secret-1")


def test_wildcards_take_linear_time_on_hostile_patterns():
    # A backtracking matcher takes exponential time here; placing each run leftmost does not.
    pattern = "*a" * 2000 + "*?b*"
    resource = "a" * 20_000
    assert not allows(policy(allow(resource=pattern)), USER, "kinesis:PutRecord", resource)
    assert allows(policy(allow(resource=pattern)), USER, "kinesis:PutRecord", resource + "b")


# --- conditions ---------------------------------------------------------------------------

TOPIC = f"arn:aws:sns:us-east-1:{OTHER}:alerts"


def sns_to_sqs(operator="ArnEquals", key="aws:SourceArn", value=TOPIC) -> dict:
    """The statement `aws sns subscribe` users put on a queue."""
    return policy(allow({"Service": "sns.amazonaws.com"}, action="sqs:SendMessage", resource=QUEUE,
                        Condition={operator: {key: value}}))


SNS = {"aws:PrincipalService": "sns.amazonaws.com"}


def test_source_arn_condition():
    assert allows(sns_to_sqs(), USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": TOPIC})
    assert not allows(sns_to_sqs(), USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": TOPIC + "2"})
    assert not allows(sns_to_sqs(), USER, "sqs:SendMessage", QUEUE, SNS)  # key absent: no match
    like = sns_to_sqs("ArnLike", value=f"arn:aws:sns:*:{OTHER}:*")
    assert allows(like, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": TOPIC})
    elsewhere = f"arn:aws:sns:us-east-1:{THIRD}:alerts"
    assert not allows(like, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": elsewhere})


def test_arn_wildcards_stay_within_one_colon_separated_part():
    like = sns_to_sqs("ArnLike", value="arn:aws:sns:*:alerts")  # five parts: never an ARN's six
    assert not allows(like, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": TOPIC})
    assert allows(sns_to_sqs("StringLike", value="arn:aws:sns:*:alerts"), USER, "sqs:SendMessage", QUEUE,
                  {**SNS, "aws:SourceArn": TOPIC})
    assert not allows(sns_to_sqs("ArnLike", value=TOPIC), USER, "sqs:SendMessage", QUEUE,
                      {**SNS, "aws:SourceArn": "alerts"})


def test_source_account_condition_and_case_insensitive_keys():
    doc = sns_to_sqs("StringEquals", "AWS:SourceAccount", OTHER)
    assert allows(doc, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:sourceaccount": OTHER})
    assert not allows(doc, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceAccount": THIRD})
    numeric_json = sns_to_sqs("StringEquals", "aws:SourceAccount", int(OTHER))  # a JSON number, as some write it
    assert allows(numeric_json, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceAccount": OTHER})


def test_principal_account_and_arn_are_filled_from_the_caller():
    doc = policy(allow("*", Condition={"StringEquals": {"aws:PrincipalAccount": OTHER}}))
    assert allows(doc, USER, "kinesis:PutRecord", STREAM)
    assert not allows(doc, STRANGER, "kinesis:PutRecord", STREAM)
    assert not allows(doc, STRANGER, "kinesis:PutRecord", STREAM, {"aws:PrincipalAccount": OTHER})  # the caller's wins
    by_arn = policy(allow("*", Condition={"ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{OTHER}:role/team/*"}}))
    assert allows(by_arn, SESSION, "kinesis:PutRecord", STREAM)  # an assumed-role session's PrincipalArn is its role
    assert not allows(by_arn, USER, "kinesis:PutRecord", STREAM)


def test_several_values_are_or_and_several_keys_and_operators_are_and():
    doc = policy(allow("*", Condition={"StringEquals": {"aws:SourceAccount": [THIRD, OTHER], "aws:SourceVpc": "vpc-1"},
                                       "Bool": {"aws:SecureTransport": True}}))
    good = {"aws:SourceAccount": OTHER, "aws:SourceVpc": "vpc-1", "aws:SecureTransport": "true"}
    assert allows(doc, USER, "kinesis:PutRecord", STREAM, good)
    assert not allows(doc, USER, "kinesis:PutRecord", STREAM, {**good, "aws:SourceVpc": "vpc-2"})
    assert not allows(doc, USER, "kinesis:PutRecord", STREAM, {**good, "aws:SecureTransport": "false"})
    assert not allows(doc, USER, "kinesis:PutRecord", STREAM, {**good, "aws:SourceAccount": OWNER})


@pytest.mark.parametrize("operator,wanted,actual,expected", [
    ("StringEquals", "abc", "abc", True), ("StringEquals", "abc", "ABC", False),
    ("StringNotEquals", "abc", "abd", True), ("StringNotEquals", ["abc", "abd"], "abd", False),
    ("StringEqualsIgnoreCase", "abc", "ABC", True), ("StringNotEqualsIgnoreCase", "abc", "ABC", False),
    ("StringLike", "a*c", "abbbc", True), ("StringLike", "a?c", "abc", True), ("StringLike", "a?c", "abbc", False),
    ("StringLike", "A*", "abc", False), ("StringNotLike", "x*", "abc", True), ("StringNotLike", "a*", "abc", False),
    ("ArnEquals", TOPIC, TOPIC, True), ("ArnNotEquals", TOPIC, TOPIC, False),
    ("ArnNotLike", "arn:aws:sns:*:*:x", TOPIC, True),
    ("Bool", "true", "true", True), ("Bool", True, "TRUE", True), ("Bool", "true", "false", False),
    ("NumericEquals", "10", "10.0", True), ("NumericEquals", 10, "11", False), ("NumericNotEquals", "10", "11", True),
    ("NumericLessThan", "10", "9", True), ("NumericLessThan", "10", "10", False),
    ("NumericLessThanEquals", "10", "10", True), ("NumericGreaterThan", "10", "11", True),
    ("NumericGreaterThan", "10", "10", False), ("NumericGreaterThanEquals", "10", "10", True),
    ("NumericEquals", "10", "ten", False), ("NumericEquals", "ten", "10", False),
])
def test_operators(operator, wanted, actual, expected):
    doc = policy(allow("*", Condition={operator: {"k:x": wanted}}))
    assert allows(doc, USER, "kinesis:PutRecord", STREAM, {"k:x": actual}) is expected


@pytest.mark.parametrize("operator,expected", [
    ("StringEquals", False), ("StringLike", False), ("ArnLike", False), ("Bool", False), ("NumericLessThan", False),
    # As AWS documents: a negated operator holds when the key is absent.
    ("StringNotEquals", True), ("StringNotLike", True), ("ArnNotLike", True), ("NumericNotEquals", True),
    ("StringEqualsIfExists", True), ("ArnLikeIfExists", True), ("StringNotEqualsIfExists", True),
    ("ForAnyValue:StringEquals", False), ("ForAllValues:StringEquals", True), ("ForAnyValue:StringLikeIfExists", True),
])
def test_an_absent_key(operator, expected):
    doc = policy(allow("*", Condition={operator: {"aws:SourceArn": "1"}}))
    assert allows(doc, USER, "kinesis:PutRecord", STREAM, {"other": "1"}) is expected


def test_if_exists_still_tests_a_present_key():
    doc = sns_to_sqs("ArnEqualsIfExists")
    assert allows(doc, USER, "sqs:SendMessage", QUEUE, SNS)
    assert allows(doc, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": TOPIC})
    assert not allows(doc, USER, "sqs:SendMessage", QUEUE, {**SNS, "aws:SourceArn": TOPIC + "2"})


def test_null_operator():
    absent = policy(allow("*", Condition={"Null": {"aws:SourceArn": "true"}}))
    present = policy(allow("*", Condition={"Null": {"aws:SourceArn": False}}))
    assert allows(absent, USER, "kinesis:PutRecord", STREAM)
    assert not allows(absent, USER, "kinesis:PutRecord", STREAM, {"aws:SourceArn": TOPIC})
    assert allows(present, USER, "kinesis:PutRecord", STREAM, {"aws:SourceArn": TOPIC})
    assert not allows(present, USER, "kinesis:PutRecord", STREAM)


def test_set_operators_over_multivalued_keys():
    any_doc = policy(allow("*", Condition={"ForAnyValue:StringEquals": {"aws:TagKeys": ["env", "team"]}}))
    all_doc = policy(allow("*", Condition={"ForAllValues:StringLike": {"aws:TagKeys": ["env", "team*"]}}))
    assert allows(any_doc, USER, "kinesis:PutRecord", STREAM, {"aws:TagKeys": ["cost", "team"]})
    assert not allows(any_doc, USER, "kinesis:PutRecord", STREAM, {"aws:TagKeys": ["cost"]})
    assert allows(all_doc, USER, "kinesis:PutRecord", STREAM, {"aws:TagKeys": ["env", "team-a"]})
    assert not allows(all_doc, USER, "kinesis:PutRecord", STREAM, {"aws:TagKeys": ["env", "cost"]})
    assert allows(all_doc, USER, "kinesis:PutRecord", STREAM, {"aws:TagKeys": []})  # vacuously


@pytest.mark.parametrize("operator",
                         ["DateLessThan", "IpAddress", "StringEqualz", "Sometimes:StringEquals", "BinaryEquals"])
def test_an_unknown_operator_makes_the_statement_not_match(operator):
    condition = {operator: {"aws:SourceArn": TOPIC}}
    context = {"aws:SourceArn": TOPIC}
    doc = policy(allow("*", Condition=condition))
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM, context) == "ImplicitDeny"
    # ... a Deny statement with it does not deny either.
    doc = policy(allow("*"), deny("*", Condition=condition))
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM, context) == "Allow"


def test_a_conditional_deny():
    doc = policy(allow(), deny("*", Condition={"Bool": {"aws:SecureTransport": "false"}}))
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM, {"aws:SecureTransport": "false"}) == "Deny"
    assert evaluate(doc, USER, "kinesis:PutRecord", STREAM, {"aws:SecureTransport": "true"}) == "Allow"


# --- policies as services store them ------------------------------------------------------

def test_a_lambda_add_permission_policy():
    fn = f"arn:aws:lambda:us-east-1:{OWNER}:function:worker"
    doc = json.dumps({"Version": "2012-10-17", "Id": "default", "Statement": [
        {"Sid": "cross", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OTHER}:root"},
         "Action": "lambda:InvokeFunction", "Resource": fn},
        {"Sid": "s3", "Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"},
         "Action": "lambda:InvokeFunction", "Resource": fn, "Condition": {"StringEquals": {"AWS:SourceAccount": THIRD},
                                       "ArnLike": {"AWS:SourceArn": "arn:aws:s3:::uploads"}}}]})
    assert allows(doc, SESSION, "lambda:InvokeFunction", fn)
    assert not allows(doc, SESSION, "lambda:GetFunction", fn)
    assert not allows(doc, STRANGER, "lambda:InvokeFunction", fn)
    s3 = {"aws:PrincipalService": "s3.amazonaws.com", "aws:SourceAccount": THIRD,
          "aws:SourceArn": "arn:aws:s3:::uploads"}
    assert allows(doc, STRANGER, "lambda:InvokeFunction", fn, s3)
    assert not allows(doc, STRANGER, "lambda:InvokeFunction", fn, {**s3, "aws:SourceArn": "arn:aws:s3:::other"})


def test_an_s3_bucket_policy():
    doc = policy({"Effect": "Allow", "Principal": {"AWS": [ROLE]}, "Action": ["s3:GetObject", "s3:ListBucket"],
                  "Resource": ["arn:aws:s3:::data", "arn:aws:s3:::data/*"]})
    assert allows(doc, SESSION, "s3:GetObject", "arn:aws:s3:::data/2024/a.json")
    assert allows(doc, SESSION, "s3:ListBucket", "arn:aws:s3:::data")
    assert not allows(doc, SESSION, "s3:PutObject", "arn:aws:s3:::data/a.json")
    assert not allows(doc, SESSION, "s3:GetObject", "arn:aws:s3:::database/a.json")


# --- the refusal --------------------------------------------------------------------------

def test_denied_message():
    assert denied_message(SESSION.arn, "kinesis:PutRecord", STREAM) == (
        f"User: arn:aws:sts::{OTHER}:assumed-role/Reader/s1 is not authorized to perform: kinesis:PutRecord "
        f"on resource: {STREAM} because no resource-based policy allows the kinesis:PutRecord action")
    fn = "arn:aws:lambda:us-east-1:1:function:f"
    assert denied_message(USER.arn, "lambda:InvokeFunction", fn, explicit=True) == (
        f"User: arn:aws:iam::{OTHER}:user/alice is not authorized to perform: lambda:InvokeFunction on resource: "
        f"{fn} with an explicit deny in a resource-based policy")


def test_random_documents_never_raise():
    """Seeded, so deterministic: documents built from policy-shaped parts and junk."""
    rng = random.Random(34)
    leaves = ["*", OTHER, ROLE, "kinesis:*", STREAM, "Allow", "Deny", 7, 1.5, True, None, [], {}, "a?*", "arn:aws:*"]
    keys = ["Statement", "Effect", "Principal", "NotPrincipal", "AWS", "Service", "Action", "NotAction", "Resource",
            "NotResource", "Condition", "StringLike", "ForAllValues:ArnLike", "NumericLessThanIfExists", "Null",
            "aws:SourceArn", "aws:PrincipalService", "Bool"]

    def junk(depth: int):
        kind = rng.random()
        if depth > 4 or kind < 0.4:
            return rng.choice(leaves)
        if kind < 0.6:
            return [junk(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(keys): junk(depth + 1) for _ in range(rng.randint(0, 5))}

    for _ in range(3000):
        doc = junk(0)
        context = {"aws:SourceArn": rng.choice([TOPIC, "x", ["a", "b"]]), "aws:PrincipalService": "sns.amazonaws.com"}
        for candidate in (doc, json.dumps(doc), {"Statement": doc}):
            assert evaluate(candidate, rng.choice([USER, SESSION]), "kinesis:PutRecord", STREAM, context) in (
                "Allow", "Deny", "ImplicitDeny")
