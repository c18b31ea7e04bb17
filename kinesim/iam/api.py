"""IAM's HTTP front: AWS's query protocol (`Action=...&Version=2010-05-08`), answered in XML,
told apart from the other query services by the `iam` of the request's signature scope."""
from __future__ import annotations

from kinesim.protocol.query_app import QueryApp

from .service import IamService

# A policy document may have 131,072 characters (the model's limit), up to 3 bytes each once
# form-encoded, with the rest of the form: well under this.
MAX_REQUEST_BYTES = 1024 * 1024


def iam_app(service: IamService) -> QueryApp:
    return QueryApp("iam", service, "iam", MAX_REQUEST_BYTES,
                    "roles, users, groups, access keys, instance profiles, managed and inline policies are what "
                    "it has (no login profiles, MFA, SAML/OIDC providers, certificates or policy simulation); "
                    "policies are stored, not enforced")
