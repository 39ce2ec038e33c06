-- report_tool_usage: one row per project x tool (its sessions' calls: the projects of an ingest's changed
-- sessions, before and after, are rebuilt)
-- incremental: project_id
with

tool_calls as (
    select * from fct_tool_calls
),

sessions as (
    select * from dim_sessions
),

calls as (
    select
        sessions.project_id,
        calls.session_id,
        calls.tool_name,
        calls.tool_family,
        calls.is_success,
        calls.duration_ms
    from tool_calls as calls
    inner join sessions on calls.session_id = sessions.session_id
    where calls.tool_name is not null
),

usage as (
    select
        project_id,
        tool_name,
        any_value(tool_family) as tool_family,
        count(*)::integer as n_calls,
        count(distinct session_id)::integer as n_sessions,
        count(*) filter (where not is_success)::integer as n_failed,
        round(
            count(*) filter (where not is_success)
            / nullif(count(*) filter (where is_success is not null), 0),
            4
        ) as failure_rate,
        median(duration_ms)::double as median_duration_ms
    from calls
    group by project_id, tool_name
)

select * from usage
