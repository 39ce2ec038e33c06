-- usage_rollup(period, legs := 'int_usage_legs'): the legs of int_usage_legs (or of the table or CTE that
-- legs names, with its columns) summed per period ('day', 'week' or 'month'; UTC, ISO weeks), project and
-- model. Figures sum what the legs record; a leg that does not record a figure is counted in
-- n_legs_unknown_input / n_legs_unknown_cost instead of being taken as 0, so a sum with a non-zero count
-- beside it is a lower bound. The report_usage_* models are this per period.
create or replace macro usage_rollup(period, legs := 'int_usage_legs') as table
    select
        project_id,
        model,
        date_trunc(period, day)::date as period_start,
        count(distinct session_id)::integer as n_sessions,
        sum(requests)::bigint as requests,
        sum(input_tokens)::bigint as input_tokens,
        sum(output_tokens)::bigint as output_tokens,
        sum(cache_read_tokens)::bigint as cache_read_tokens,
        sum(cache_write_tokens)::bigint as cache_write_tokens,
        sum(reasoning_tokens)::bigint as reasoning_tokens,
        sum(premium_requests) as premium_requests,
        sum(ai_credits) as ai_credits,
        sum(cost_usd) as cost_usd,
        (count(*) filter (where input_tokens is null and requests > 0))::integer as n_legs_unknown_input,
        (count(*) filter (where cost_source = 'unknown'))::integer as n_legs_unknown_cost,
        (count(*) filter (where cost_source = 'estimated'))::integer as n_legs_estimated_cost
    from query_table(legs)
    group by project_id, model, date_trunc(period, day)::date
