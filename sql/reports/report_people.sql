-- report_people: one row per person. In team mode the person is who pushed the session (`push --user`);
-- in a machine's own warehouse there is one row, `(this machine)`. A person's row is their sessions': a change
-- rebuilds the people of the changed sessions (before and after).
-- incremental: user_name
with

sessions as (
    select * from dim_sessions
),

usage_legs as (
    select * from int_usage_legs
),

people_sessions as (
    select
        session_id,
        machine_id,
        project_id,
        n_turns,
        n_tool_calls,
        n_failed_tool_calls,
        started_at,
        coalesce(user_name, '(this machine)') as user_name,
        coalesce(ended_at, started_at) as last_at
    from sessions
),

activity as (
    select
        user_name,
        count(distinct machine_id)::integer as n_machines,
        count(*)::integer as n_sessions,
        count(distinct project_id)::integer as n_projects,
        sum(n_turns)::bigint as n_turns,
        sum(n_tool_calls)::bigint as n_tool_calls,
        sum(n_failed_tool_calls)::bigint as n_failed_tool_calls,
        min(started_at) as first_seen_at,
        max(last_at) as last_seen_at
    from people_sessions
    group by user_name
),

usage_per_person as (
    select
        people_sessions.user_name,
        sum(usage_legs.requests)::bigint as requests,
        sum(usage_legs.output_tokens)::bigint as output_tokens,
        sum(usage_legs.ai_credits) as ai_credits,
        sum(usage_legs.cost_usd) as cost_usd,
        (count(*) filter (where usage_legs.cost_source = 'unknown'))::integer as n_legs_unknown_cost
    from usage_legs
    inner join people_sessions on usage_legs.session_id = people_sessions.session_id
    group by people_sessions.user_name
),

people as (
    select
        activity.user_name,
        activity.n_machines,
        activity.n_sessions,
        activity.n_projects,
        activity.n_turns,
        activity.n_tool_calls,
        activity.n_failed_tool_calls,
        usage_per_person.requests,
        usage_per_person.output_tokens,
        usage_per_person.ai_credits,
        usage_per_person.cost_usd,
        activity.first_seen_at,
        activity.last_seen_at,
        coalesce(usage_per_person.n_legs_unknown_cost, 0) as n_legs_unknown_cost
    from activity
    left join usage_per_person on activity.user_name = usage_per_person.user_name
)

select * from people
