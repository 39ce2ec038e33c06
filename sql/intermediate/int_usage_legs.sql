-- int_usage_legs: one row per session x leg x model (fct_usage_legs) with its project and the UTC
-- day it is dated by (its last request, else the leg's or the session's start); the base of the
-- report_usage_* models, so every period and the CLI's `usage` add up the same rows.
-- incremental: session_id
with

usage_legs as (
    select * from fct_usage_legs
),

sessions as (
    select * from dim_sessions
),

legs_dated as (
    select
        sessions.project_id,
        usage_legs.session_id,
        usage_legs.leg_index,
        usage_legs.model,
        usage_legs.requests,
        usage_legs.input_tokens,
        usage_legs.output_tokens,
        usage_legs.cache_read_tokens,
        usage_legs.cache_write_tokens,
        usage_legs.reasoning_tokens,
        usage_legs.premium_requests,
        usage_legs.ai_credits,
        usage_legs.cost_usd,
        usage_legs.cost_source,
        timezone('UTC', coalesce(usage_legs.used_at, usage_legs.started_at, sessions.started_at))::date as day
    from usage_legs
    inner join sessions on usage_legs.session_id = sessions.session_id
)

select * from legs_dated
where day is not null
