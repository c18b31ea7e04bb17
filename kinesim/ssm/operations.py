"""Parameter Store's operations: AWS's operation name -> the function `(service, params) -> response`
that answers it. One explicit table, imported by the service class."""
from __future__ import annotations

from typing import Any, Callable

from . import labels_api, listing_api, parameters_api, tags_api

OPERATIONS: dict[str, Callable[..., Any]] = {
    # parameters_api
    "PutParameter": parameters_api.put_parameter,
    "GetParameter": parameters_api.get_parameter,
    "GetParameters": parameters_api.get_parameters,
    "DeleteParameter": parameters_api.delete_parameter,
    "DeleteParameters": parameters_api.delete_parameters,
    "GetParameterHistory": parameters_api.get_parameter_history,
    # labels_api
    "LabelParameterVersion": labels_api.label_parameter_version,
    "UnlabelParameterVersion": labels_api.unlabel_parameter_version,
    # listing_api
    "DescribeParameters": listing_api.describe_parameters,
    "GetParametersByPath": listing_api.get_parameters_by_path,
    # tags_api
    "AddTagsToResource": tags_api.add_tags_to_resource,
    "ListTagsForResource": tags_api.list_tags_for_resource,
    "RemoveTagsFromResource": tags_api.remove_tags_from_resource,
}
