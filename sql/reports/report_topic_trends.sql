-- report_topic_trends: one row per project x top-20 topic term x month of session start
with

topics as (
    select * from report_topics
),

project_months as (
    select * from int_topic_project_months
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
        months.project_id,
        months.term,
        months.month,
        months.n_sessions,
        months.tf
    from project_months as months
    inner join top_terms on months.project_id = top_terms.project_id and months.term = top_terms.term
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
