-- report_session_stats: one row per session
with calls as (
    select
        session_id,
        count(*) filter (where is_success is not null) as n_completed
    from fct_tool_calls
    group by session_id
),

files as (
    select
        session_id,
        count(distinct file_id)::integer as n_files,
        (count(distinct file_id) filter (where action in ('edit', 'create')))::integer as n_files_changed
    from fct_file_touches
    group by session_id
),

checkpoints as (
    select
        session_id,
        count(*)::integer as n_checkpoints
    from fct_checkpoints
    group by session_id
),

usage as (
    select
        session_id,
        sum(input_tokens)::bigint as input_tokens,
        sum(output_tokens)::bigint as output_tokens
    from fct_usage
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
        usage.input_tokens,
        usage.output_tokens,
        sessions.models,
        round(sessions.n_failed_tool_calls / nullif(calls.n_completed, 0), 4) as failure_rate,
        coalesce(files.n_files, 0) as n_files,
        coalesce(files.n_files_changed, 0) as n_files_changed,
        coalesce(checkpoints.n_checkpoints, 0) as n_checkpoints
    from dim_sessions as sessions
    left join calls on sessions.session_id = calls.session_id
    left join files on sessions.session_id = files.session_id
    left join checkpoints on sessions.session_id = checkpoints.session_id
    left join usage on sessions.session_id = usage.session_id
)

select * from stats
