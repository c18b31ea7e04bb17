"""A function's set-up: the packages of the AWS SDK for JavaScript v3 that a Node.js function's code
imports and kinesim has not installed yet are installed on first use (js_sdk_fetch.py). Meanwhile
a new function is Pending, an updated one's LastUpdateStatus InProgress, with AWS's reasons, as
AWS's states cover its own set-up; an Invoke meanwhile waits for it instead of being refused."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from . import js_sdk_fetch

if TYPE_CHECKING:
    from .service import LambdaService

log = logging.getLogger("kinesim.functions")

# What a set-up adds to a function's configuration (a new revision drops them).
REASONS = ("StateReason", "StateReasonCode", "LastUpdateStatusReason", "LastUpdateStatusReasonCode")

SET_UP_LIMIT_S = 90.0  # a Pending function is Active after this, its packages installed or not


def begin(cfg: dict[str, Any], previous: dict[str, Any] | None = None) -> list[str]:
    """The SDK packages the new revision's code imports that are not installed (js_sdk_fetch):
    while they are fetched, a new function is Pending (so is one updated while still Pending),
    an updated one's LastUpdateStatus InProgress, with AWS's reasons. Returns them."""
    missing = js_sdk_fetch.FETCHER.missing(js_sdk_fetch.FETCHER.needed(cfg))
    if missing:
        if previous is None or previous.get("State") == "Pending":
            cfg.update(State="Pending", StateReason="The function is being created.", StateReasonCode="Creating")
        else:
            cfg.update(LastUpdateStatus="InProgress", LastUpdateStatusReason="The function is being created.",
                       LastUpdateStatusReasonCode="Creating")
    return missing


def start(svc: LambdaService, cfg: dict[str, Any], missing: list[str]) -> None:
    """Fetch the packages in the background; the function is Active (its update Successful) once
    they are done, installed or not (a handler that imports one that is not gets an error that
    says why: js_sdk_fetch.explain), or after SET_UP_LIMIT_S at most (a deployment waits for it),
    unless it has changed since."""
    name, revision = cfg["FunctionName"], cfg["RevisionId"]

    def done() -> None:
        try:
            with svc.lock:
                current = svc.functions.get(name)
                if current is None or current.get("RevisionId") != revision:
                    return  # deleted, or changed again: that change has its own set-up
                if current.get("State") != "Pending" and current.get("LastUpdateStatus") != "InProgress":
                    return  # done already
                doc = dict(current)
                if doc.get("State") == "Pending":
                    doc["State"] = "Active"
                if doc.get("LastUpdateStatus") == "InProgress":
                    doc["LastUpdateStatus"] = "Successful"
                for key in REASONS:
                    doc.pop(key, None)
                svc.save_function(doc)
        except Exception:  # noqa: BLE001 - the server is closing, say: it resumes the set-up on start
            log.exception("could not finish setting up function %s", name)

    js_sdk_fetch.FETCHER.fetch(missing, then=done)
    limit = threading.Timer(SET_UP_LIMIT_S, done)
    limit.daemon = True
    limit.start()


def resume(svc: LambdaService) -> None:
    """On start: the set-ups a stopped server left Pending / InProgress."""
    for cfg in list(svc.functions.values()):
        if cfg.get("State") == "Pending" or cfg.get("LastUpdateStatus") == "InProgress":
            start(svc, cfg, js_sdk_fetch.FETCHER.needed(cfg))
