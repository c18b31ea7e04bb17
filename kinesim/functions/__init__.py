"""Lambda-style functions: Python handlers run in warm worker processes (`runtime`, `worker`), and
what they print is kept per function in CloudWatch Logs' shape (`logs`)."""
