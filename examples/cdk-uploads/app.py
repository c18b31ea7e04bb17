#!/usr/bin/env python3
"""The same app as bin/app.ts, in Python: `cdk deploy --app "python3 app.py"` (with
`pip install -r requirements.txt`). Uploads under in/ trigger a function that forwards each object's
key and size to a queue; uploads under raw/ go to the queue directly; an AwsCustomResource writes an
SSM parameter and a Provider-backed resource computes an output. Every construct here hides a
custom resource the CDK adds for you."""
import os

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr

app = cdk.App()
stack = cdk.Stack(app, "UploadsStack", stack_name=os.environ.get("STACK_NAME", "cdk-uploads"))
greeting = app.node.try_get_context("greeting") or "hello"

bucket = s3.Bucket(stack, "Uploads", removal_policy=cdk.RemovalPolicy.DESTROY,
                   auto_delete_objects=True)  # `cdk destroy` empties the bucket first
queue = sqs.Queue(stack, "Uploaded", removal_policy=cdk.RemovalPolicy.DESTROY)

on_upload = lambda_.Function(
    stack, "OnUpload", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
    code=lambda_.Code.from_asset(os.path.join(os.path.dirname(__file__), "handler")),
    environment={"QUEUE_URL": queue.queue_url, "GREETING": greeting},
    log_retention=logs.RetentionDays.ONE_WEEK)
queue.grant_send_messages(on_upload)
bucket.add_event_notification(s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(on_upload),
                              s3.NotificationKeyFilter(prefix="in/"))
bucket.add_event_notification(s3.EventType.OBJECT_CREATED, s3n.SqsDestination(queue),
                              s3.NotificationKeyFilter(prefix="raw/"))

# An SDK call as a resource: the parameter is written on create and update, deleted on delete.
parameter_name = f"/{stack.stack_name}/greeting"
cr.AwsCustomResource(
    stack, "GreetingParameter",
    on_update=cr.AwsSdkCall(
        service="SSM", action="putParameter",
        parameters={"Name": parameter_name, "Value": greeting, "Type": "String", "Overwrite": True},
        physical_resource_id=cr.PhysicalResourceId.of(parameter_name)),
    on_delete=cr.AwsSdkCall(service="SSM", action="deleteParameter", parameters={"Name": parameter_name}),
    policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=cr.AwsCustomResourcePolicy.ANY_RESOURCE),
    install_latest_aws_sdk=False)

# A resource of your own, through the Provider framework.
shout = lambda_.Function(
    stack, "Shout", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.on_event",
    code=lambda_.Code.from_inline("\n".join([
        "def on_event(event, context):",
        "    text = event['ResourceProperties']['Text']",
        "    return {'PhysicalResourceId': 'shout-' + text, 'Data': {'Loud': text.upper() + '!'}}"])))
provider = cr.Provider(stack, "ShoutProvider", on_event_handler=shout)
loud = cdk.CustomResource(stack, "LoudGreeting", service_token=provider.service_token,
                          properties={"Text": greeting})

cdk.CfnOutput(stack, "BucketName", value=bucket.bucket_name)
cdk.CfnOutput(stack, "QueueUrl", value=queue.queue_url)
cdk.CfnOutput(stack, "FunctionName", value=on_upload.function_name)
cdk.CfnOutput(stack, "Loud", value=loud.get_att_string("Loud"))

app.synth()
