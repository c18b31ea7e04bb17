"""Event generators for `kinesim put --generate NAME`: endless iterators of JSON-ready dicts.

A generator is a class taking `seed` (None: a fresh random sequence) and `clock` (seconds since the
epoch, for the events' own timestamps), with `key_field`: the field used as partition key unless the
user picks another, so that one entity's events stay in order on one shard.
"""
from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

SITE = "https://shop.example.com"
USERS = 5000
PRODUCTS = 2000
CATEGORIES = ["electronics", "books", "clothing", "home-garden", "toys", "sports", "beauty", "grocery"]
SEARCHES = ["headphones", "running+shoes", "coffee+maker", "usb-c+cable", "yoga+mat", "desk+lamp", "backpack",
            "novel", "lego", "sunscreen"]
# Where a session's first page comes from; None is direct traffic (typed URL, bookmark).
EXTERNAL_REFERRERS = (["https://www.google.com/", "https://www.bing.com/", "https://duckduckgo.com/",
                       "https://www.facebook.com/", "https://t.co/", "https://www.instagram.com/", None],
                      [40, 6, 4, 10, 5, 5, 30])
DEVICES = (["mobile", "desktop", "tablet"], [58, 36, 6])
COUNTRIES = (["US", "GB", "DE", "FR", "IN", "BR", "CA", "JP", "AU", "ES", "NL", "MX"],
             [38, 9, 8, 6, 9, 6, 5, 5, 4, 4, 3, 3])
# A shop's funnel: the kind of page a visitor goes to next, by the kind of page they are on.
NEXT_PAGE = {
    "landing": (["home", "product", "category", "search"], [35, 30, 20, 15]),
    "home": (["category", "search", "product", "account", "help"], [35, 25, 30, 5, 5]),
    "category": (["product", "category", "search", "home"], [70, 10, 10, 10]),
    "search": (["product", "search", "home"], [70, 20, 10]),
    "product": (["product", "cart", "category", "search", "home"], [35, 25, 20, 15, 5]),
    "cart": (["checkout", "product", "home"], [55, 30, 15]),
    "checkout": (["login", "payment", "cart"], [15, 70, 15]),
    "login": (["payment", "home"], [85, 15]),
    "payment": (["confirmation", "cart"], [85, 15]),
    "confirmation": (["home", "product"], [60, 40]),
    "account": (["home", "product"], [50, 50]),
    "help": (["home", "search"], [60, 40]),
}
FIXED_PATHS = {"home": "/home", "cart": "/cart", "checkout": "/checkout", "login": "/login",
               "payment": "/checkout/payment", "confirmation": "/checkout/confirmation", "account": "/account",
               "help": "/help"}
SESSION_CONTINUES = 0.85  # chance that a user's next event belongs to their current session


def _zipf_weights(n: int, s: float = 1.0) -> list[float]:
    """Cumulative weights where item i is 1/(i+1)^s as likely as the first: a few users and products
    account for much of the traffic, as on real sites."""
    total, out = 0.0, []
    for i in range(n):
        total += 1.0 / (i + 1) ** s
        out.append(total)
    return out


class Clickstream:
    """Click events on an online shop: visitors in sessions moving through a browse -> cart ->
    checkout funnel.

    {"event_id", "user_id", "session_id", "page", "referrer", "ts" (Unix time in seconds with ms, as
    lambdas/ expects), "device", "country", "duration_ms"}. With a seed every field but `ts` (the
    clock at generation) repeats.
    """
    key_field = "user_id"

    def __init__(self, seed: int | None = None, clock: Callable[[], float] = time.time):
        self.rng = random.Random(seed)
        self.clock = clock
        self.user_weights = _zipf_weights(USERS, 0.8)
        self.product_weights = _zipf_weights(PRODUCTS, 1.0)
        self.sessions: dict[int, tuple[str, str, str]] = {}  # user -> (session id, page kind, page path)
        self.profiles: dict[int, tuple[str, str]] = {}  # user -> (device, country): people keep theirs

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        rng = self.rng
        user = rng.choices(range(USERS), cum_weights=self.user_weights)[0]
        session = self.sessions.get(user)
        if session is None or rng.random() >= SESSION_CONTINUES:
            session_id = f"s-{rng.getrandbits(64):016x}"
            kind = self._pick(NEXT_PAGE["landing"])
            referrer = self._pick(EXTERNAL_REFERRERS)
        else:
            session_id, previous_kind, previous_path = session
            kind = self._pick(NEXT_PAGE[previous_kind])
            referrer = SITE + previous_path
        page = self._path(kind)
        self.sessions[user] = (session_id, kind, page)
        if user not in self.profiles:
            self.profiles[user] = (self._pick(DEVICES), self._pick(COUNTRIES))
        device, country = self.profiles[user]
        return {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "user_id": f"user-{user + 1:05d}",
            "session_id": session_id,
            "page": page,
            "referrer": referrer,
            "ts": round(self.clock(), 3),
            "device": device,
            "country": country,
            # Time on page: log-normal, median ~ 9 s, a long tail of readers.
            "duration_ms": max(200, int(rng.lognormvariate(math.log(9000), 0.9))),
        }

    def _pick(self, options: tuple[list, list[int]]) -> Any:
        return self.rng.choices(options[0], weights=options[1])[0]

    def _path(self, kind: str) -> str:
        if kind == "product":
            return f"/products/{self.rng.choices(range(1, PRODUCTS + 1), cum_weights=self.product_weights)[0]}"
        if kind == "category":
            return f"/category/{self.rng.choice(CATEGORIES)}"
        if kind == "search":
            return f"/search?q={self.rng.choice(SEARCHES)}"
        return FIXED_PATHS[kind]


GENERATORS: dict[str, type] = {"clickstream": Clickstream}
