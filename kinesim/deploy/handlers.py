"""The resource types `kinesim deploy` makes, each with its handler: an explicit table, one
import per service module, so what a template may use is read in one place."""
from __future__ import annotations

from .cdk_resources import CdkMetadata
from .custom_resources import CustomResource, is_custom
from .channel_resources import KinesisChannel
from .ecr_resources import EcrRepository
from .event_invoke_config_resources import LambdaEventInvokeConfig
from .firehose_resources import FirehoseDeliveryStream
from .iam_principal_resources import (IamAccessKey, IamGroup, IamInstanceProfile, IamUser,
                                      IamUserToGroupAddition)
from .iam_resources import IamManagedPolicy, IamPolicy, IamRole
from .kinesis_resources import KinesisStream, KinesisStreamConsumer
from .lambda_resources import EventSourceMapping, LambdaFunction
from .lambda_version_resources import (CodeDeployApplication, CodeDeployDeploymentGroup, LambdaAlias,
                                       LambdaLayerVersion, LambdaVersion)
from .logs_resources import LogsLogGroup, LogsLogStream
from .permission_resources import LambdaPermission
from .resources import ResourceHandler
from .s3_policy_resources import S3BucketPolicy
from .s3_resources import S3Bucket
from .sns_resources import SnsSubscription, SnsTopic, SnsTopicPolicy
from .sqs_resources import SqsQueue, SqsQueuePolicy
from .ssm_resources import SsmParameter
from .stack_resources import CloudFormationStack

HANDLERS: dict[str, type[ResourceHandler]] = {h.type_name: h for h in (
    KinesisStream, KinesisStreamConsumer, KinesisChannel,
    LambdaFunction, EventSourceMapping,
    LambdaVersion, LambdaAlias, LambdaLayerVersion, LambdaEventInvokeConfig,
    CodeDeployApplication, CodeDeployDeploymentGroup,
    LambdaPermission,
    FirehoseDeliveryStream,
    S3Bucket, S3BucketPolicy,
    LogsLogGroup, LogsLogStream,
    SnsTopic, SnsSubscription, SnsTopicPolicy,
    SqsQueue, SqsQueuePolicy,
    SsmParameter,
    IamRole, IamPolicy, IamManagedPolicy,
    IamUser, IamGroup, IamAccessKey, IamUserToGroupAddition, IamInstanceProfile,
    EcrRepository,
    CdkMetadata,
    CloudFormationStack,
)}


def handler_class(type_name: str) -> type[ResourceHandler] | None:
    """The handler of a resource type (custom resources' for `Custom::*`), None if unsupported."""
    return CustomResource if is_custom(type_name) else HANDLERS.get(type_name)
