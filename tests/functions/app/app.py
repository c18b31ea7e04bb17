"""Handlers for tests/test_functions_runtime.py: one code directory, one function per handler."""
import decimal
import logging
import os
import sys
import time

import helper  # a sibling module: the code directory is first on sys.path

INIT_PID = os.getpid()
INVOCATIONS = 0
print("init: loading app")  # init code: runs once per worker (a cold start)

logger = logging.getLogger()
logger.setLevel(logging.INFO)


def describe(event, context):
    """What the handler sees: its context, environment and process."""
    global INVOCATIONS
    INVOCATIONS += 1
    print("describe got", event)
    logger.info("logged %s", "at info")
    return {
        "event": event,
        "aws_request_id": context.aws_request_id,
        "function_name": context.function_name,
        "function_version": context.function_version,
        "invoked_function_arn": context.invoked_function_arn,
        "memory_limit_in_mb": context.memory_limit_in_mb,
        "log_group_name": context.log_group_name,
        "log_stream_name": context.log_stream_name,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "identity": [context.identity.cognito_identity_id, context.identity.cognito_identity_pool_id],
        "client_context": None if context.client_context is None else context.client_context.custom,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "sys_path0": sys.path[0],
        "helper": helper.NAME,
        "pid": os.getpid(),
        "init_pid": INIT_PID,
        "invocations": INVOCATIONS,
        "stdout_encoding": sys.stdout.encoding,
    }


def noop(event, context):
    return None


def echo(event, context):
    return event


def sleep(event, context):
    started = time.time()
    print("sleeping", event["seconds"])
    time.sleep(event["seconds"])
    return {"pid": os.getpid(), "started": started, "ended": time.time()}


def fail(event, context):
    print("about to fail")
    raise ValueError("bad input: " + str(event.get("n")))


def exit_(event, context):
    print("about to exit")
    os._exit(event.get("code", 1))


def unserializable(event, context):
    return {"a": {1, 2}}


def decimals(event, context):
    return {"price": decimal.Decimal("19.99"), "text": "caf\u00e9"}


def big(event, context):
    return "x" * event["size"]


def shout(event, context):
    """Output through every path: print, stderr, a subprocess writing to fd 1, logging, context.log."""
    print("to stdout")
    print("to stderr", file=sys.stderr)
    os.system("echo from a subprocess")
    logger.warning("multi\nline")
    context.log("via context.log\n")
    print("no newline", end="")
    return "ok"


def chatty(event, context):
    for i in range(event["lines"]):
        print(f"line {i:05d} " + "y" * 40)
    return "done"


def crash(event, context):
    import signal
    print("about to crash")
    os.kill(os.getpid(), signal.SIGSEGV)


def sys_exit(event, context):
    sys.exit(event.get("code"))
