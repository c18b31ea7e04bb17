"""Amazon SQS: standard and FIFO queues, durable in the store (kinesim.sqs.service)."""
