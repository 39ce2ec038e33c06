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

session_starts as (
    select
        session_id,
        timezone('UTC', started_at)::date as day,
        count(*)::integer as n_sessions
    from sessions
    where started_at is not null
    group by session_id, timezone('UTC', started_at)::date
),

turn_days as (
    select
        session_id,
        timezone('UTC', started_at)::date as day,
        count(*)::integer as n_turns
    from turns
    where started_at is not null
    group by session_id, timezone('UTC', started_at)::date
),

call_days as (
    select
        session_id,
        timezone('UTC', started_at)::date as day,
        count(*)::integer as n_tool_calls,
        (count(*) filter (where not is_success))::integer as n_failed_tool_calls
    from tool_calls
    where started_at is not null
    group by session_id, timezone('UTC', started_at)::date
),

session_days as (
    select
        session_id,
        day
    from session_starts
    union
    select
        session_id,
        day
    from turn_days
    union
    select
        session_id,
        day
    from call_days
),

activity as (
    select
        session_days.session_id,
        session_days.day,
        coalesce(session_starts.n_sessions, 0) as n_sessions,
        coalesce(turn_days.n_turns, 0) as n_turns,
        coalesce(call_days.n_tool_calls, 0) as n_tool_calls,
        coalesce(call_days.n_failed_tool_calls, 0) as n_failed_tool_calls
    from session_days
    left join session_starts
        on session_days.session_id = session_starts.session_id and session_days.day = session_starts.day
    left join turn_days
        on session_days.session_id = turn_days.session_id and session_days.day = turn_days.day
    left join call_days
        on session_days.session_id = call_days.session_id and session_days.day = call_days.day
)

select * from activity
