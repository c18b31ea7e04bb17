"""CloudWatch Logs: log groups, streams and events (functions' logs among them), filter patterns."""
