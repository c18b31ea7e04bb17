"""SNS's HTTP front: AWS's query protocol (`Action=...&Version=2010-03-31`), answered in XML.

The UnsubscribeURL in each notification is a GET of `?Action=Unsubscribe&SubscriptionArn=...` that
AWS serves without a signature (it is meant to be opened from an e-mail or a log); so is it here.
"""
from __future__ import annotations

from kinesim.protocol.query_app import QueryApp

from .service import SnsService

# A batch of 256 KiB of messages, form-encoded (up to 3 bytes a byte for non-ASCII text), and its
# parameter names: well under this.
MAX_REQUEST_BYTES = 4 * 1024 * 1024


def sns_app(service: SnsService) -> QueryApp:
    return QueryApp("sns", service, "sns", MAX_REQUEST_BYTES,
                    "topics, subscriptions to SQS, Lambda and Firehose, and publishing are what it has "
                    "(no mobile push, SMS, permissions or data protection)",
                    unsigned=frozenset(("Unsubscribe",)), traced=True)
