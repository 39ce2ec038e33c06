-- int_topic_idf: one row per topic term; the inverse document frequency over all sessions,
-- idf = ln(1 + N / df), shared by report_topics and report_topic_trends
with

topic_terms as (
    select * from int_topic_terms
),

corpus as (
    select count(distinct session_id) as n_sessions
    from topic_terms
),

document_frequency as (
    select
        term,
        count(distinct session_id) as df
    from topic_terms
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
