-- report_model_usage: one row per month x model (month of the session's start)
with usage as (
    select
        usage.model,
        usage.session_id,
        usage.requests,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        (date_trunc('month', sessions.started_at))::date as month
    from fct_usage as usage
    inner join dim_sessions as sessions on usage.session_id = sessions.session_id
    where sessions.started_at is not null
),

monthly as (
    select
        month,
        model,
        count(distinct session_id)::integer as n_sessions,
        sum(requests)::bigint as requests,
        sum(input_tokens)::bigint as input_tokens,
        sum(output_tokens)::bigint as output_tokens,
        sum(cache_read_tokens)::bigint as cache_read_tokens
    from usage
    group by month, model
)

select * from monthly
