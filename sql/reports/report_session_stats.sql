-- report_session_stats: one row per session
-- incremental: session_id
with

sessions as (
    select * from dim_sessions
),

tool_calls as (
    select * from fct_tool_calls
),

file_touches as (
    select * from fct_file_touches
),

session_checkpoints as (
    select * from fct_checkpoints
),

session_usage as (
    select * from fct_usage
),

calls as (
    select
        session_id,
        count(*) filter (where is_success is not null) as n_completed
    from tool_calls
    group by session_id
),

files as (
    select
        session_id,
        count(distinct file_id)::integer as n_files,
        (count(distinct file_id) filter (where action in ('edit', 'create')))::integer as n_files_changed
    from file_touches
    group by session_id
),

checkpoints as (
    select
        session_id,
        count(*)::integer as n_checkpoints
    from session_checkpoints
    group by session_id
),

usage as (
    -- a figure some model of the session does not know is not known for the session (NULL)
    select
        session_id,
        sum(requests)::bigint as requests,
        (case when count(input_tokens) = count(*) then sum(input_tokens) end)::bigint as input_tokens,
        (case when count(output_tokens) = count(*) then sum(output_tokens) end)::bigint as output_tokens,
        case when count(ai_credits) = count(*) then sum(ai_credits) end as ai_credits,
        case when count(cost_usd) = count(*) then sum(cost_usd) end as cost_usd,
        case
            when bool_or(cost_source = 'unknown') then 'unknown'
            when bool_or(cost_source = 'estimated') then 'estimated'
            else 'logged'
        end as cost_source
    from session_usage
    group by session_id
),

stats as (
    select
        sessions.session_id,
        sessions.project_id,
        sessions.title,
        sessions.client,
        sessions.started_at,
        sessions.duration_s,
        sessions.n_turns,
        sessions.n_tool_calls,
        sessions.n_failed_tool_calls,
        usage.requests,
        usage.input_tokens,
        usage.output_tokens,
        usage.ai_credits,
        usage.cost_usd,
        usage.cost_source,
        sessions.models,
        round(sessions.n_failed_tool_calls / nullif(calls.n_completed, 0), 4) as failure_rate,
        coalesce(files.n_files, 0) as n_files,
        coalesce(files.n_files_changed, 0) as n_files_changed,
        coalesce(checkpoints.n_checkpoints, 0) as n_checkpoints
    from sessions
    left join calls on sessions.session_id = calls.session_id
    left join files on sessions.session_id = files.session_id
    left join checkpoints on sessions.session_id = checkpoints.session_id
    left join usage on sessions.session_id = usage.session_id
)

select * from stats
