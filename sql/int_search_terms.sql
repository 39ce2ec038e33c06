-- int_search_terms: one row per document x term, the inverted index behind search(), for the
-- documents of the sessions in _model_scope and the memories of no session
with tokens as (
    select
        doc_id,
        session_id,
        unnest(tokenize(text)) as term
    from int_search_docs
    where
        session_id is null
        or session_id in (select _model_scope.session_id from _model_scope)
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
