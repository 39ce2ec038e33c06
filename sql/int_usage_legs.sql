-- int_usage_legs: one row per session x leg x model (fct_usage_legs) with its project and the UTC
-- day it is dated by (its last request, else the leg's or the session's start); the base of the
-- report_usage_* models, so every period and the CLI's `usage` add up the same rows.
with legs as (
    select
        sessions.project_id,
        legs.session_id,
        legs.leg_index,
        legs.model,
        legs.requests,
        legs.input_tokens,
        legs.output_tokens,
        legs.cache_read_tokens,
        legs.cache_write_tokens,
        legs.reasoning_tokens,
        legs.premium_requests,
        legs.ai_credits,
        legs.cost_usd,
        legs.cost_source,
        timezone('UTC', coalesce(legs.used_at, legs.started_at, sessions.started_at))::date as day
    from fct_usage_legs as legs
    inner join dim_sessions as sessions on legs.session_id = sessions.session_id
)

select * from legs
where day is not null
