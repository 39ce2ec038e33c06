-- report_model_usage: one row per month x model (UTC month the usage happened in, see
-- int_usage_legs); sums of what the legs know, with the count of legs whose input or cost is unknown.
-- The projects' monthly sums (report_usage_monthly) added up: a session belongs to one project, so its
-- sessions and legs are counted once, and no leg is read again for a change.
with

monthly_per_project as (
    select * from report_usage_monthly
),

monthly as (
    select
        model,
        month,
        sum(n_sessions)::integer as n_sessions,
        sum(requests)::bigint as requests,
        sum(input_tokens)::bigint as input_tokens,
        sum(output_tokens)::bigint as output_tokens,
        sum(cache_read_tokens)::bigint as cache_read_tokens,
        sum(ai_credits) as ai_credits,
        sum(cost_usd) as cost_usd,
        sum(n_legs_unknown_input)::integer as n_legs_unknown_input,
        sum(n_legs_unknown_cost)::integer as n_legs_unknown_cost
    from monthly_per_project
    group by month, model
)

select * from monthly
