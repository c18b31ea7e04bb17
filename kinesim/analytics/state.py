"""Where kinesim's warm Spark keeps its state (`connect_server`): ``<data dir>/spark-connect/``,
beside the kinesim server's buckets, and the JSON tables' kept schemas and the tables kept in
Spark's memory recorded there. A module of its own so that `continuous` reaches them without
importing `connect_server` (which imports `continuous`)."""
from __future__ import annotations

import json
import os

STATE_DIR_NAME = "spark-connect"  # beside the buckets and the database


def state_dir(s3_root: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(s3_root)), STATE_DIR_NAME)


def schema_cache(s3_root: str, conf: dict[str, str] | None = None):
    """JSON tables' schemas (`json_schemas.SchemaCache`), kept with the warm Spark's state; `conf`,
    the session's Spark settings, may change what Spark infers."""
    from .json_schemas import SchemaCache
    return SchemaCache(os.path.join(state_dir(s3_root), "schemas"), json.dumps(sorted((conf or {}).items())))


def warm_tables(s3_root: str, conf: dict[str, str] | None = None):
    """Tables kept in the warm Spark's memory (`table_cache.WarmTables`), recorded with its state;
    `conf`, the session's Spark settings, may change the rows read."""
    from .table_cache import WarmTables
    return WarmTables(os.path.join(state_dir(s3_root), "warm"), json.dumps(sorted((conf or {}).items())))
