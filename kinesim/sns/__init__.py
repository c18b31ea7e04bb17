"""SNS: topics, subscriptions, Publish/PublishBatch and deliveries to SQS, Lambda and Firehose."""
