-- int_topic_project_terms: one row per project x topic term; what report_topics weighs and int_topic_idf sums.
-- A session belongs to one project and starts in one month, so the project's months add up to it (sessions
-- without a start time are counted from int_topic_terms); a term's document frequency over all sessions is the
-- sum of its n_sessions over the projects, and N (sessions with any term) the sum of n_project_sessions.
-- Kept per project, as int_topic_project_months.
-- incremental: project_id
with

-- read twice: not copied first
topic_terms as not materialized (
    select * from int_topic_terms
),

project_months as (
    select * from int_topic_project_months
),

project_sessions as (
    select
        project_id,
        count(distinct session_id)::integer as n_project_sessions
    from topic_terms
    group by project_id
),

undated as (
    select
        project_id,
        term,
        count(distinct session_id)::integer as n_sessions,
        sum(weight) as tf
    from topic_terms
    where session_started_at is null
    group by project_id, term
),

parts as (
    select
        project_id,
        term,
        n_sessions,
        tf,
        first_seen_at,
        last_seen_at
    from project_months
    union all
    select
        project_id,
        term,
        n_sessions,
        tf,
        null as first_seen_at,
        null as last_seen_at
    from undated
),

per_term as (
    select
        project_id,
        term,
        sum(tf) as tf,
        sum(n_sessions)::integer as n_sessions,
        min(first_seen_at) as first_seen_at,
        max(last_seen_at) as last_seen_at
    from parts
    group by project_id, term
),

with_totals as (
    select
        per_term.*,
        project_sessions.n_project_sessions
    from per_term
    inner join project_sessions on per_term.project_id = project_sessions.project_id
)

select * from with_totals
