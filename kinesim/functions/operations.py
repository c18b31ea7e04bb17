"""The Lambda operations: AWS's operation name -> the function `(service, params, context) -> response`
that answers it.

One explicit table, imported by the service class (the operation modules import the service only
for type checking)."""
from __future__ import annotations

from typing import Any, Callable

from . import (concurrency_api, event_invoke_config_api, functions_api, layers_api, mappings_api, permissions_api,
               recursion_config_api, versions_api)

OPERATIONS: dict[str, Callable[..., Any]] = {
    # functions_api
    "CreateFunction": functions_api.create_function,
    "GetFunction": functions_api.get_function,
    "GetFunctionConfiguration": functions_api.get_function_configuration,
    "ListFunctions": functions_api.list_functions,
    "UpdateFunctionCode": functions_api.update_function_code,
    "UpdateFunctionConfiguration": functions_api.update_function_configuration,
    "DeleteFunction": functions_api.delete_function,
    "Invoke": functions_api.invoke,
    "TagResource": functions_api.tag_resource,
    "UntagResource": functions_api.untag_resource,
    "ListTags": functions_api.list_tags,
    "GetAccountSettings": functions_api.get_account_settings,
    # versions_api
    "PublishVersion": versions_api.publish_version,
    "ListVersionsByFunction": versions_api.list_versions_by_function,
    "CreateAlias": versions_api.create_alias,
    "GetAlias": versions_api.get_alias,
    "UpdateAlias": versions_api.update_alias,
    "DeleteAlias": versions_api.delete_alias,
    "ListAliases": versions_api.list_aliases,
    # layers_api
    "PublishLayerVersion": layers_api.publish_layer_version,
    "GetLayerVersion": layers_api.get_layer_version,
    "GetLayerVersionByArn": layers_api.get_layer_version_by_arn,
    "ListLayerVersions": layers_api.list_layer_versions,
    "ListLayers": layers_api.list_layers,
    "DeleteLayerVersion": layers_api.delete_layer_version,
    # permissions_api
    "AddPermission": permissions_api.add_permission,
    "RemovePermission": permissions_api.remove_permission,
    "GetPolicy": permissions_api.get_policy,
    # mappings_api
    "CreateEventSourceMapping": mappings_api.create_event_source_mapping,
    "GetEventSourceMapping": mappings_api.get_event_source_mapping,
    "ListEventSourceMappings": mappings_api.list_event_source_mappings,
    "UpdateEventSourceMapping": mappings_api.update_event_source_mapping,
    "DeleteEventSourceMapping": mappings_api.delete_event_source_mapping,
    # event_invoke_config_api
    "PutFunctionEventInvokeConfig": event_invoke_config_api.put_function_event_invoke_config,
    "UpdateFunctionEventInvokeConfig": event_invoke_config_api.update_function_event_invoke_config,
    "GetFunctionEventInvokeConfig": event_invoke_config_api.get_function_event_invoke_config,
    "DeleteFunctionEventInvokeConfig": event_invoke_config_api.delete_function_event_invoke_config,
    "ListFunctionEventInvokeConfigs": event_invoke_config_api.list_function_event_invoke_configs,
    # recursion_config_api
    "PutFunctionRecursionConfig": recursion_config_api.put_function_recursion_config,
    "GetFunctionRecursionConfig": recursion_config_api.get_function_recursion_config,
    # concurrency_api
    "PutFunctionConcurrency": concurrency_api.put_function_concurrency,
    "GetFunctionConcurrency": concurrency_api.get_function_concurrency,
    "DeleteFunctionConcurrency": concurrency_api.delete_function_concurrency,
}

