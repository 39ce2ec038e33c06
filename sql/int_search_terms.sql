-- int_search_terms: one row per document x term, the inverted index behind search()
with tokens as (
    select
        doc_id,
        unnest(tokenize(text)) as term
    from int_search_docs
),

term_counts as (
    select
        doc_id,
        term,
        count(*)::integer as tf
    from tokens
    group by doc_id, term
)

select * from term_counts
