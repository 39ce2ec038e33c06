-- report_activity_weekly: one row per ISO week (Monday start) with any activity
with

daily as (
    select * from report_activity_daily
),

weekly as (
    select
        (date_trunc('week', day))::date as week,
        sum(n_sessions)::integer as n_sessions,
        sum(n_turns)::integer as n_turns,
        sum(n_tool_calls)::integer as n_tool_calls,
        sum(n_failed_tool_calls)::integer as n_failed_tool_calls,
        count(*)::integer as n_active_days
    from daily
    group by (date_trunc('week', day))::date
)

select * from weekly
