-- int_session_days: one row per session x UTC day with activity: whether the session started that day,
-- and its prompts, tool calls and failed tool calls that day. report_activity_daily adds these up, so a
-- change reads its sessions' rows and the per-day sums, not every prompt and tool call again.
-- incremental: session_id
with

sessions as (
    select * from dim_sessions
),

turns as (
    select * from fct_turns
),

tool_calls as (
    select * from fct_tool_calls
),

activity as (
    -- one row per thing that happened, counted in its column
    select
        session_id,
        started_at,
        1 as n_sessions,
        0 as n_turns,
        0 as n_tool_calls,
        0 as n_failed_tool_calls
    from sessions
    union all
    select
        session_id,
        started_at,
        0 as n_sessions,
        1 as n_turns,
        0 as n_tool_calls,
        0 as n_failed_tool_calls
    from turns
    union all
    select
        session_id,
        started_at,
        0 as n_sessions,
        0 as n_turns,
        1 as n_tool_calls,
        case when not is_success then 1 else 0 end as n_failed_tool_calls
    from tool_calls
),

session_days as (
    select
        session_id,
        timezone('UTC', started_at)::date as day,
        sum(n_sessions)::integer as n_sessions,
        sum(n_turns)::integer as n_turns,
        sum(n_tool_calls)::integer as n_tool_calls,
        sum(n_failed_tool_calls)::integer as n_failed_tool_calls
    from activity
    where started_at is not null
    group by session_id, timezone('UTC', started_at)::date
)

select * from session_days
