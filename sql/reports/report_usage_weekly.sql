-- report_usage_weekly: one row per week x project x model with model use (UTC; ISO weeks, Monday first),
-- the legs of int_usage_legs summed by the usage_rollup macro (sql/macros/usage_rollup.sql). A project's rows
-- are its sessions' legs: an ingest rebuilds the projects its changed sessions belong to (before and after)
-- (usage_legs is read by the macro, which names it: the linter misses that)
-- incremental: project_id
with

usage_legs as (  -- noqa: ST03
    select * from int_usage_legs
),

rollup as (
    select * from usage_rollup('week', legs := 'usage_legs')
)

select
    project_id,
    model,
    n_sessions,
    requests,
    input_tokens,
    output_tokens,
    cache_read_tokens,
    cache_write_tokens,
    reasoning_tokens,
    premium_requests,
    ai_credits,
    cost_usd,
    n_legs_unknown_input,
    n_legs_unknown_cost,
    n_legs_estimated_cost,
    period_start as week
from rollup
