def _connect():
    raise RuntimeError("cannot reach the database")


CONNECTION = _connect()


def handler(event, context):
    return CONNECTION
