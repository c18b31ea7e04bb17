"""Kinesis Data Streams: one module per concern, each operation a plain function."""
from importlib import import_module

# Importing a module registers its operations with `service.operation`.
_MODULES = ["streams", "records", "iterators", "shards", "resharding", "consumers", "tags", "policies"]
OPERATION_MODULES = [import_module(f"{__name__}.{m}") for m in _MODULES
                     if __import__("importlib.util").util.find_spec(f"{__name__}.{m}")]
