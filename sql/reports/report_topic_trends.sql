-- report_topic_trends: one row per project x top-20 topic term x month of session start
with

topics as (
    select * from report_topics
),

topic_terms as (
    select * from int_topic_terms
),

topic_idf as (
    select * from int_topic_idf
),

top_terms as (
    select
        project_id,
        term
    from topics
    where rank <= 20
),

monthly as (
    select
        terms.project_id,
        terms.term,
        (date_trunc('month', timezone('UTC', terms.session_started_at)))::date as month,
        count(distinct terms.session_id)::integer as n_sessions,
        sum(terms.weight) as tf
    from topic_terms as terms
    inner join top_terms on terms.project_id = top_terms.project_id and terms.term = top_terms.term
    where terms.session_started_at is not null
    group by terms.project_id, terms.term, (date_trunc('month', timezone('UTC', terms.session_started_at)))::date
),

weighted as (
    select
        monthly.project_id,
        monthly.term,
        monthly.month,
        monthly.n_sessions,
        round(monthly.tf * topic_idf.idf, 4) as weight
    from monthly
    inner join topic_idf on monthly.term = topic_idf.term
)

select * from weighted
