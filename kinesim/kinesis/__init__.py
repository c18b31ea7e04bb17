"""Kinesis Data Streams: one module per concern, each operation a plain function (see service.py)."""
