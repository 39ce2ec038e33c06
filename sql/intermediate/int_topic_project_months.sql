-- int_topic_project_months: one row per project x topic term x month of session start (sessions with a start
-- time); what report_topic_trends weighs, and int_topic_project_terms sums. A session belongs to one project and
-- starts in one month, so the rows of a project and month are computed from its sessions of that month alone: an
-- ingest rebuilds the rows of the project months its changed sessions belong to (before and after the change),
-- not the whole history's.
-- incremental: project_month
with

topic_terms as (
    select * from int_topic_terms
),

-- a session's terms by project, term and month: a row each, so each month counts its sessions with count(*)
-- (count(distinct) over every text's rows was the model's cost); weights are whole numbers, summed exactly
session_months as (
    select
        project_id,
        term,
        session_id,
        (date_trunc('month', timezone('UTC', session_started_at)))::date as month,
        sum(weight) as tf,
        any_value(session_started_at) as session_started_at
    from topic_terms
    where session_started_at is not null
    group by project_id, term, session_id, (date_trunc('month', timezone('UTC', session_started_at)))::date
),

monthly as (
    select
        project_id,
        term,
        month,
        count(*)::integer as n_sessions,
        sum(tf) as tf,
        min(session_started_at) as first_seen_at,
        max(session_started_at) as last_seen_at
    from session_months
    group by project_id, term, month
)

select * from monthly
