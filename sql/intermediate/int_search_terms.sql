-- int_search_terms: one row per document x term, the inverted index behind search()
-- incremental: doc_id
with

docs as (
    select * from int_search_docs
),

tokens as (
    select
        doc_id,
        session_id,
        unnest(tokenize(text)) as term
    from docs
),

term_counts as (
    select
        doc_id,
        session_id,
        term,
        count(*)::integer as tf
    from tokens
    group by doc_id, session_id, term
)

select * from term_counts
