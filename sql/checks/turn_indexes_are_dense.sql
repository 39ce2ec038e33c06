-- turn_index runs 0..n-1 in every session, and n_turns agrees with fct_turns
with per_session as (
    select
        session_id,
        count(*) as n_rows,
        min(turn_index) as first_index,
        max(turn_index) as last_index
    from fct_turns
    group by session_id
)

select
    dim_sessions.session_id,
    dim_sessions.n_turns,
    per_session.n_rows,
    per_session.first_index,
    per_session.last_index
from dim_sessions
left join per_session on dim_sessions.session_id = per_session.session_id
where
    dim_sessions.n_turns != coalesce(per_session.n_rows, 0)
    or per_session.first_index != 0
    or per_session.last_index != per_session.n_rows - 1
