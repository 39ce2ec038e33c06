-- report_people_usage_weekly: one row per ISO week (UTC, Monday first) x person x model with model use;
-- the legs of int_usage_legs summed, as report_usage_weekly does per project; a change rebuilds the people of
-- the changed sessions (before and after)
-- incremental: user_name
with

sessions as (
    select * from dim_sessions
),

usage_legs as (
    select * from int_usage_legs
),

legs_of_people as (
    select
        usage_legs.model,
        usage_legs.session_id,
        usage_legs.requests,
        usage_legs.input_tokens,
        usage_legs.output_tokens,
        usage_legs.ai_credits,
        usage_legs.cost_usd,
        usage_legs.cost_source,
        coalesce(sessions.user_name, '(this machine)') as user_name,
        (date_trunc('week', usage_legs.day))::date as week
    from usage_legs
    inner join sessions on usage_legs.session_id = sessions.session_id
),

weekly as (
    select
        week,
        user_name,
        model,
        count(distinct session_id)::integer as n_sessions,
        sum(requests)::bigint as requests,
        sum(input_tokens)::bigint as input_tokens,
        sum(output_tokens)::bigint as output_tokens,
        sum(ai_credits) as ai_credits,
        sum(cost_usd) as cost_usd,
        (count(*) filter (where input_tokens is null and requests > 0))::integer as n_legs_unknown_input,
        (count(*) filter (where cost_source = 'unknown'))::integer as n_legs_unknown_cost,
        (count(*) filter (where cost_source = 'estimated'))::integer as n_legs_estimated_cost
    from legs_of_people
    group by week, user_name, model
)

select * from weekly
