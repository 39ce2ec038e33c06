-- int_topic_idf: one row per topic term; the inverse document frequency over all sessions,
-- idf = ln(1 + N / df), shared by report_topics and report_topic_trends. A session belongs to one
-- project: df and N are sums over the projects (int_topic_project_terms).
with

project_terms as (
    select * from int_topic_project_terms
),

projects as (
    select distinct
        project_id,
        n_project_sessions
    from project_terms
),

corpus as (
    select sum(n_project_sessions)::bigint as n_sessions
    from projects
),

document_frequency as (
    select
        term,
        sum(n_sessions)::bigint as df
    from project_terms
    group by term
),

idf as (
    select
        document_frequency.term,
        document_frequency.df,
        ln(1 + corpus.n_sessions / document_frequency.df) as idf
    from document_frequency
    cross join corpus
)

select * from idf
