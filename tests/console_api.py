"""The web console's JSON API as the tests call it: get(path, **query) and post(path, **requests
keywords) under /_kinesim/console/api/<area>, answering requests' Response."""
from __future__ import annotations

import requests

API = "/_kinesim/console/api"


class ConsoleApi:
    def __init__(self, url: str, area: str = ""):
        self.base = url + API + area

    def get(self, path: str, **params) -> requests.Response:
        return requests.get(self.base + path, params=params, timeout=30)

    def post(self, path: str, **kwargs) -> requests.Response:
        return requests.post(self.base + path, timeout=60, **kwargs)
