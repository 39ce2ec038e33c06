-- report_activity_daily: one row per UTC day with any activity
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

session_days as (
    select
        timezone('UTC', started_at)::date as day,
        count(*)::integer as n_sessions
    from sessions
    where started_at is not null
    group by timezone('UTC', started_at)::date
),

turn_days as (
    select
        timezone('UTC', started_at)::date as day,
        count(*)::integer as n_turns
    from turns
    where started_at is not null
    group by timezone('UTC', started_at)::date
),

call_days as (
    select
        timezone('UTC', started_at)::date as day,
        count(*)::integer as n_tool_calls,
        (count(*) filter (where not is_success))::integer as n_failed_tool_calls
    from tool_calls
    where started_at is not null
    group by timezone('UTC', started_at)::date
),

days as (
    select day from session_days
    union
    select day from turn_days
    union
    select day from call_days
),

daily as (
    select
        days.day,
        coalesce(session_days.n_sessions, 0) as n_sessions,
        coalesce(turn_days.n_turns, 0) as n_turns,
        coalesce(call_days.n_tool_calls, 0) as n_tool_calls,
        coalesce(call_days.n_failed_tool_calls, 0) as n_failed_tool_calls
    from days
    left join session_days on days.day = session_days.day
    left join turn_days on days.day = turn_days.day
    left join call_days on days.day = call_days.day
)

select * from daily
