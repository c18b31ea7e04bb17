"""The Kafka APIs kinesim serves, by api key (the versions of each are codec.VERSIONS')."""
from __future__ import annotations

from .handlers import metadata, versions

OPERATIONS = {
    18: versions.api_versions,
    3: metadata.metadata,
    60: metadata.describe_cluster,
}
