"""kinesim reads botocore's service models itself (kinesim/protocol/models.py, to keep botocore's
loader and urllib3 out of `kinesim serve`'s start-up): what it reads must be exactly what botocore's
own Loader gives, for every service kinesim answers, also when ~/.aws/models holds a newer version."""
from __future__ import annotations

import json
import os

import botocore.loaders
import pytest

from kinesim.protocol import models

SERVICES = ["kinesis", "firehose", "lambda", "sqs", "sns", "logs", "ecr", "ssm", "sts", "cloudformation", "s3"]


@pytest.mark.parametrize("service", SERVICES)
def test_the_model_is_botocores(service):
    assert models.load_service_model(service) == botocore.loaders.Loader().load_service_model(service, "service-2")


def test_a_customer_model_of_a_later_version_wins_as_in_botocore(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    # botocore reads HOME once, when imported
    monkeypatch.setattr(botocore.loaders.Loader, "CUSTOMER_DATA_PATH", str(tmp_path / ".aws" / "models"))
    model = {"version": "2.0", "metadata": {"apiVersion": "2099-01-01", "protocol": "json"},
             "operations": {}, "shapes": {}}
    later = tmp_path / ".aws" / "models" / "kinesis" / "2099-01-01"
    later.mkdir(parents=True)
    (later / "service-2.json").write_text(json.dumps(model))
    loader = botocore.loaders.Loader()
    assert loader.search_paths[0] == os.path.join(str(tmp_path), ".aws", "models")
    assert models.load_service_model("kinesis") == loader.load_service_model("kinesis", "service-2") == model


def test_an_unknown_service_has_no_model():
    with pytest.raises(models.UnknownModel):
        models.load_service_model("no-such-service")
