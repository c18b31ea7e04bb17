"""Parts of the server made on first use, so that `kinesim serve` answers its first call without
having imported or built the services that call does not need (issue 22).

- `Lazy`: a value made once, by whichever thread asks first; the others wait for it.
- `LazyService`: stands in for a JSON-protocol service in the edge's routing tables from the
  start (its target prefix is known without making it), and makes it on first use.
- `LazyApp`: the same for a WSGI app (S3, Lambda's REST API, the query-protocol services).

The stand-ins stay in place once the service is made, so that the edge's identity checks
(`app is self.s3`, `service is self.sqs`) hold across the change; what they forward is then a
plain instance-attribute lookup (see `LazyService.__getattr__`), not a call per use. A reset of the
server (`Services.reset`) has them `forget` the service, which is made again on its next use.
"""
from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Generic, Iterable, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    def __init__(self, make: Callable[[], T]):
        self._make = make
        self._lock = threading.Lock()
        self._value: T | None = None

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._make()
                value = self._value
        return value

    @property
    def made(self) -> bool:
        return self._value is not None

    def if_made(self) -> T | None:
        """The value if it was made, without making it (closing what was started)."""
        return self._value

    def forget(self) -> T | None:
        """Drop the value, so that the next `get` makes a new one (a reset of the server, after
        the old one was closed and its data deleted); the value dropped, if any."""
        with self._lock:
            value, self._value = self._value, None
        return value


# Attributes a service sets once in its constructor and never replaces: a stand-in keeps them,
# as it keeps the service's bound methods, after their first lookup.
_STABLE = frozenset(("validator", "operations", "protocol"))


class LazyService:
    def __init__(self, lazy: Lazy[Any], target_prefix: str):
        self.lazy = lazy
        self.target_prefix = target_prefix

    def __getattr__(self, name: str) -> Any:  # only for names not (yet) in this object's __dict__
        if name.startswith("__"):
            raise AttributeError(name)  # copy, pickle and friends probing: not the service's
        service = self.lazy.get()
        value = getattr(service, name)
        if name in _STABLE or inspect.ismethod(value):
            self.__dict__[name] = value
            if self.lazy.if_made() is not service:  # forgotten meanwhile: keep nothing of the old one
                self.__dict__.pop(name, None)
        return value

    def forget(self) -> Any:
        """Make the service again on its next use (`Lazy.forget`), keeping nothing of the old one;
        the old service, if it was made."""
        service = self.lazy.forget()
        for name in [n for n in self.__dict__ if n not in ("lazy", "target_prefix")]:
            self.__dict__.pop(name, None)
        return service


class LazyApp:
    """A WSGI app made on first use. `might_accept(environ)`, when given, answers `accepts`
    for requests that cannot be the app's without making it (a cheap superset of its check)."""

    def __init__(self, lazy: Lazy[Any], might_accept: Callable[[dict[str, Any]], bool] | None = None):
        self.lazy = lazy
        self._might_accept = might_accept

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        return self.lazy.get()(environ, start_response)

    def accepts(self, environ: dict[str, Any]) -> bool:
        if self._might_accept is not None and not self._might_accept(environ):
            return False
        return self.lazy.get().accepts(environ)

    def error_answer(self, err: Any, environ: dict[str, Any] | None = None) -> tuple[str, list, bytes]:
        return self.lazy.get().error_answer(err, environ)

    def forget(self) -> Any:
        """Make the app again on its next use; the old app, if it was made."""
        return self.lazy.forget()
