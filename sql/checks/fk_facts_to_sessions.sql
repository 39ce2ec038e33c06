-- every fact row points at an existing session
with fact_sessions as (
    select
        'fct_turns' as fact,
        session_id
    from fct_turns
    union all
    select
        'fct_tool_calls' as fact,
        session_id
    from fct_tool_calls
    union all
    select
        'fct_file_touches' as fact,
        session_id
    from fct_file_touches
    union all
    select
        'fct_checkpoints' as fact,
        session_id
    from fct_checkpoints
    union all
    select
        'fct_refs' as fact,
        session_id
    from fct_refs
    union all
    select
        'fct_usage' as fact,
        session_id
    from fct_usage
)

select
    fact_sessions.fact,
    fact_sessions.session_id
from fact_sessions
anti join dim_sessions on fact_sessions.session_id = dim_sessions.session_id
