"""CloudFormation made on first use. Its engine (the SAM translator, a YAML parser, the deploy
handlers) takes ~0.7 s to import: a server that is never asked to deploy does not pay for it at
start-up, and one that is pays once, on the first CloudFormation request. A stack operation a
restart interrupted makes it at once, in the background, to carry the operation on."""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

from kinesim.store import Store

from .records import STACK


class LazyCloudFormation:
    def __init__(self, store: Store, make: Callable[[], tuple[Any, Any]]):
        self._make = make  # () -> (service, query app)
        self._lock = threading.Lock()
        self._made: tuple[Any, Any] | None = None
        if any(state.get("Operation") for state in store.documents(STACK).values()):
            threading.Thread(target=self._get, name="cfn-start", daemon=True).start()

    def _get(self) -> tuple[Any, Any]:
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made

    @property
    def service(self) -> Any:
        return self._get()[0]

    @property
    def made(self) -> bool:
        return self._made is not None

    def forget(self) -> Any:
        """Make the service again on its next use (a reset of the server, its stack operations
        stopped and its documents deleted); the old service, if it was made."""
        with self._lock:
            made, self._made = self._made, None
        return made[0] if made is not None else None

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        return self._get()[1](environ, start_response)

    def error_answer(self, err: Any, environ: dict[str, Any] | None = None) -> tuple[str, list, bytes]:
        return self._get()[1].error_answer(err, environ)
