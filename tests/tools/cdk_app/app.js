// kinesim's CDK end-to-end app (tests/test_tool_cdk.py), plain JavaScript so no compile step: a
// Kinesis stream triggers a Python function (KinesisEventSource) that forwards each record to an SQS
// queue. aws-cdk-lib and constructs come from the tests' tools cache through NODE_PATH, so the app
// has no package.json. The function's code is a directory asset: `cdk deploy` zips it and publishes
// it to the bootstrap bucket, as it does for users.
const path = require('path');
const cdk = require('aws-cdk-lib');
const kinesis = require('aws-cdk-lib/aws-kinesis');
const lambda = require('aws-cdk-lib/aws-lambda');
const sqs = require('aws-cdk-lib/aws-sqs');
const { KinesisEventSource } = require('aws-cdk-lib/aws-lambda-event-sources');

const app = new cdk.App();
// The test picks the stack name and a Python runtime the kinesim server can run.
const stack = new cdk.Stack(app, 'KinesimCdkTest', {
  stackName: process.env.KINESIM_CDK_STACK || 'kinesim-cdk-test',
});

const stream = new kinesis.Stream(stack, 'Clicks', { shardCount: 1 });
const queue = new sqs.Queue(stack, 'Forwarded');
const forwarder = new lambda.Function(stack, 'Forwarder', {
  runtime: new lambda.Runtime(process.env.KINESIM_CDK_RUNTIME || 'python3.11', lambda.RuntimeFamily.PYTHON),
  handler: 'index.handler',
  code: lambda.Code.fromAsset(path.join(__dirname, 'handler')),
  timeout: cdk.Duration.seconds(10),
  environment: { QUEUE_URL: queue.queueUrl },
});
queue.grantSendMessages(forwarder);
forwarder.addEventSource(new KinesisEventSource(stream, {
  startingPosition: lambda.StartingPosition.TRIM_HORIZON,
  batchSize: 10,
}));

new cdk.CfnOutput(stack, 'StreamName', { value: stream.streamName });
new cdk.CfnOutput(stack, 'QueueUrl', { value: queue.queueUrl });
new cdk.CfnOutput(stack, 'FunctionName', { value: forwarder.functionName });
