-- report_topics: one row per project x topic term (top 100 per project).
-- weight = sum of source weights in the project * ln(1 + N / df), where N is the number of
-- sessions with any term and df the number of sessions (all projects) using the term.
with

project_terms as (
    select * from int_topic_project_terms
),

topic_idf as (
    select * from int_topic_idf
),

weighted as (
    select
        project_terms.project_id,
        project_terms.term,
        project_terms.n_sessions,
        project_terms.first_seen_at,
        project_terms.last_seen_at,
        round(project_terms.tf * topic_idf.idf, 4) as weight
    from project_terms
    inner join topic_idf on project_terms.term = topic_idf.term
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
