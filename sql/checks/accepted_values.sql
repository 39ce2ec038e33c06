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
where usage_source not in ('store_usage_events', 'shutdown', 'message_output_tokens')
