-- report_activity_daily: one row per UTC day with any activity, the sessions' days (int_session_days)
-- added up
with

session_days as (
    select * from int_session_days
),

daily as (
    select
        day,
        sum(n_sessions)::integer as n_sessions,
        sum(n_turns)::integer as n_turns,
        sum(n_tool_calls)::integer as n_tool_calls,
        sum(n_failed_tool_calls)::integer as n_failed_tool_calls
    from session_days
    group by day
)

select * from daily
