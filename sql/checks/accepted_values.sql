-- enumerations hold only the values the docs promise
select
    'fct_file_touches.action' as column_name,
    action as bad_value
from fct_file_touches
where action not in ('view', 'edit', 'create')
union all
select
    'fct_tool_calls.action' as column_name,
    action as bad_value
from fct_tool_calls
where action not in ('view', 'edit', 'create')
union all
select
    'fct_refs.ref_type' as column_name,
    ref_type as bad_value
from fct_refs
where ref_type not in ('commit', 'pr', 'issue')
union all
select
    'dim_sessions.client' as column_name,
    client as bad_value
from dim_sessions
where client not in ('cli', 'vscode')
union all
select
    'fct_usage.usage_source' as column_name,
    usage_source as bad_value
from fct_usage
where
    not list_has_all(
        [
            'debug_log', 'store_usage_events', 'otel', 'usage_events', 'desktop_totals', 'shutdown', 'shutdown_delta',
            'shutdown_messages', 'message_output_tokens'
        ],
        string_split(usage_source, '+')
    )
union all
select
    'fct_usage_legs.token_source' as column_name,
    token_source as bad_value
from fct_usage_legs
where
    token_source not in (
        'debug_log', 'store_usage_events', 'otel', 'usage_events', 'desktop_totals', 'shutdown', 'shutdown_delta',
        'shutdown_messages', 'message_output_tokens'
    )
union all
select
    'fct_usage.cost_source' as column_name,
    cost_source as bad_value
from fct_usage
where cost_source not in ('logged', 'estimated', 'unknown')
union all
select
    'fct_usage_legs.cost_source' as column_name,
    cost_source as bad_value
from fct_usage_legs
where cost_source not in ('logged', 'estimated', 'unknown')
union all
select
    'fct_requests.source' as column_name,
    source as bad_value
from fct_requests
where source not in ('debug_log', 'store_usage_events', 'otel', 'usage_events', 'messages')
union all
select
    'fct_requests.cost_source' as column_name,
    cost_source as bad_value
from fct_requests
where cost_source not in ('logged', 'estimated', 'unknown')
union all
select
    'fct_tool_calls.tool_family' as column_name,
    tool_family as bad_value
from fct_tool_calls
where tool_family not in ('read', 'edit', 'create', 'search', 'shell', 'web', 'agent', 'mcp', 'other')
