-- report_topics: one row per project x topic term (top 100 per project).
-- weight = sum of source weights in the project * ln(1 + N / df), where N is the number of
-- sessions with any term and df the number of sessions (all projects) using the term.
with

topic_terms as (
    select * from int_topic_terms
),

topic_idf as (
    select * from int_topic_idf
),

per_project as (
    select
        project_id,
        term,
        sum(weight) as tf,
        count(distinct session_id)::integer as n_sessions,
        min(session_started_at) as first_seen_at,
        max(session_started_at) as last_seen_at
    from topic_terms
    group by project_id, term
),

weighted as (
    select
        per_project.project_id,
        per_project.term,
        per_project.n_sessions,
        per_project.first_seen_at,
        per_project.last_seen_at,
        round(per_project.tf * topic_idf.idf, 4) as weight
    from per_project
    inner join topic_idf on per_project.term = topic_idf.term
),

ranked as (
    select
        project_id,
        term,
        weight,
        n_sessions,
        first_seen_at,
        last_seen_at,
        row_number() over (partition by project_id order by weight desc, term asc)::integer as rank
    from weighted
)

select * from ranked
where rank <= 100
