-- after int_search_terms: each document's length in tokens (BM25's dl) is the sum of its term
-- counts, so a document's text is tokenized once, for int_search_terms, and not again for
-- int_search_docs. Only the documents the model run covered (see _model_scope) are updated.
update int_search_docs
set n_terms = counted.n_terms
from (
    select
        doc_id,
        sum(tf)::integer as n_terms
    from int_search_terms
    where
        session_id is null
        or session_id in (select _model_scope.session_id from _model_scope)
    group by doc_id
) as counted
where int_search_docs.doc_id = counted.doc_id
