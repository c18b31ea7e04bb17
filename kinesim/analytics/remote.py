"""Spark Connect client sessions: how `kinesim sql`, `kinesim queries` and `connect()` reach the
warm Spark server (`connect_server`) or another one."""
from __future__ import annotations

import os
import sys
from typing import Any


def scratch_root() -> str:
    """Where the warm server's state goes when only local --table directories are read."""
    return os.path.join(os.path.expanduser("~"), ".kinesim", "s3")


# PySpark's switch for releasing a client's server-side session when the process exits.
RELEASE_ON_EXIT = "SPARK_CONNECT_RELEASE_SESSION_ON_EXIT"


def remote_session(remote: str, conf: dict[str, str], keep: bool = False) -> Any:
    """A Spark Connect client session; runtime settings of `conf` applied to it. The server forgets
    it (temp views, cached tables) when this process exits, unless `keep`: the warm server keeps
    idle sessions for years, for the continuous queries' one."""
    from pyspark.sql import SparkSession
    from .session import _quiet_pyspark_loggers
    _quiet_pyspark_loggers()
    previous = os.environ.get(RELEASE_ON_EXIT)
    os.environ[RELEASE_ON_EXIT] = "false" if keep else "true"
    try:
        spark = SparkSession.builder.remote(remote).getOrCreate()
    finally:
        if previous is None:
            os.environ.pop(RELEASE_ON_EXIT, None)
        else:
            os.environ[RELEASE_ON_EXIT] = previous
    for key, value in conf.items():
        spark.conf.set(key, value)
    return spark


def local_spark_running() -> bool:
    """Whether this process already runs a classic Spark (next to `spark_session()`): that one is
    used, as PySpark cannot mix it with a Connect client in one process."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext
    return SparkContext._active_spark_context is not None
