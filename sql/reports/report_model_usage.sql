-- report_model_usage: one row per month x model (UTC month the usage happened in, see
-- int_usage_legs); sums of what the legs know, with the count of legs whose input or cost is unknown
with

usage_legs as (
    select * from int_usage_legs
),

monthly as (
    select
        model,
        (date_trunc('month', day))::date as month,
        count(distinct session_id)::integer as n_sessions,
        sum(requests)::bigint as requests,
        sum(input_tokens)::bigint as input_tokens,
        sum(output_tokens)::bigint as output_tokens,
        sum(cache_read_tokens)::bigint as cache_read_tokens,
        sum(ai_credits) as ai_credits,
        sum(cost_usd) as cost_usd,
        (count(*) filter (where input_tokens is null and requests > 0))::integer as n_legs_unknown_input,
        (count(*) filter (where cost_source = 'unknown'))::integer as n_legs_unknown_cost
    from usage_legs
    group by (date_trunc('month', day))::date, model
)

select * from monthly
