// A CDK app that runs unchanged on kinesim and on AWS: uploads under in/ trigger a function that
// forwards each object's key and size to a queue; uploads under raw/ go to the queue directly.
// Every construct here hides a custom resource the CDK adds for you: bucket notifications
// (Custom::S3BucketNotifications), autoDeleteObjects (Custom::S3AutoDeleteObjects), logRetention
// (Custom::LogRetention), an AwsCustomResource (an SSM parameter written by an SDK call) and a
// Provider-backed resource (a Python function computing a value for the stack's outputs).
import * as path from 'path';
import * as cdk from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3n from 'aws-cdk-lib/aws-s3-notifications';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as cr from 'aws-cdk-lib/custom-resources';

const app = new cdk.App();
const stack = new cdk.Stack(app, 'UploadsStack', { stackName: process.env.STACK_NAME ?? 'cdk-uploads' });
const greeting: string = app.node.tryGetContext('greeting') ?? 'hello';

const bucket = new s3.Bucket(stack, 'Uploads', {
  removalPolicy: cdk.RemovalPolicy.DESTROY,
  autoDeleteObjects: true, // `cdk destroy` empties the bucket first
});
const queue = new sqs.Queue(stack, 'Uploaded', { removalPolicy: cdk.RemovalPolicy.DESTROY });

const onUpload = new lambda.Function(stack, 'OnUpload', {
  runtime: lambda.Runtime.PYTHON_3_12,
  handler: 'index.handler',
  code: lambda.Code.fromAsset(path.join(__dirname, '..', 'handler')),
  environment: { QUEUE_URL: queue.queueUrl, GREETING: greeting },
  logRetention: logs.RetentionDays.ONE_WEEK,
});
queue.grantSendMessages(onUpload);
bucket.addEventNotification(s3.EventType.OBJECT_CREATED, new s3n.LambdaDestination(onUpload), { prefix: 'in/' });
bucket.addEventNotification(s3.EventType.OBJECT_CREATED, new s3n.SqsDestination(queue), { prefix: 'raw/' });

// An SDK call as a resource: the parameter is written on create and update, deleted on delete.
const parameterName = `/${stack.stackName}/greeting`;
new cr.AwsCustomResource(stack, 'GreetingParameter', {
  onUpdate: {
    service: 'SSM',
    action: 'putParameter',
    parameters: { Name: parameterName, Value: greeting, Type: 'String', Overwrite: true },
    physicalResourceId: cr.PhysicalResourceId.of(parameterName),
  },
  onDelete: { service: 'SSM', action: 'deleteParameter', parameters: { Name: parameterName } },
  policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: cr.AwsCustomResourcePolicy.ANY_RESOURCE }),
  installLatestAwsSdk: false,
});

// A resource of your own, through the Provider framework.
const shout = new lambda.Function(stack, 'Shout', {
  runtime: lambda.Runtime.PYTHON_3_12,
  handler: 'index.on_event',
  code: lambda.Code.fromInline([
    'def on_event(event, context):',
    '    text = event["ResourceProperties"]["Text"]',
    '    return {"PhysicalResourceId": "shout-" + text, "Data": {"Loud": text.upper() + "!"}}',
  ].join('\n')),
});
const provider = new cr.Provider(stack, 'ShoutProvider', { onEventHandler: shout });
const loud = new cdk.CustomResource(stack, 'LoudGreeting', {
  serviceToken: provider.serviceToken,
  properties: { Text: greeting },
});

new cdk.CfnOutput(stack, 'BucketName', { value: bucket.bucketName });
new cdk.CfnOutput(stack, 'QueueUrl', { value: queue.queueUrl });
new cdk.CfnOutput(stack, 'FunctionName', { value: onUpload.functionName });
new cdk.CfnOutput(stack, 'Loud', { value: loud.getAttString('Loud') });
