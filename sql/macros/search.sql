-- bm25_weight: what one term of a document adds to its score (k1 = 1.2, b = 0.75), also the
-- weights of the site's prebuilt search index (pipeline/site), so both rank alike.
-- idf = ln(1 + (N - df + 0.5) / (df + 0.5)).
create or replace macro bm25_weight(tf, df, n_terms, n_docs, avg_terms) as
ln(1 + (n_docs - df + 0.5) / (df + 0.5))
* tf * 2.2
/ (tf + 1.2 * (0.25 + 0.75 * n_terms / avg_terms));

-- search(words, k := 20): BM25 over int_search_docs, best first; words are tokenized like the documents.
create or replace macro search(q, k := 20) as table
    with query_terms as (
        select distinct unnest(tokenize(q)) as term
    ),

    corpus as (
        select
            count(*) as n_docs,
            avg(n_terms) as avg_terms
        from int_search_docs
    ),

    term_df as (
        select
            int_search_terms.term,
            count(*) as df
        from int_search_terms
        inner join query_terms on int_search_terms.term = query_terms.term
        group by int_search_terms.term
    ),

    scored as (
        select
            int_search_terms.doc_id,
            sum(
                bm25_weight(int_search_terms.tf, term_df.df, docs.n_terms, corpus.n_docs, corpus.avg_terms)
            ) as score,
            count(*) as n_matched_terms
        from int_search_terms
        inner join term_df on int_search_terms.term = term_df.term
        inner join int_search_docs as docs on int_search_terms.doc_id = docs.doc_id
        cross join corpus
        group by int_search_terms.doc_id
    )

    select
        docs.kind,
        docs.session_id,
        docs.ref,
        docs.title,
        docs.written_at,
        docs.text,
        scored.n_matched_terms,
        round(scored.score, 4) as score
    from scored
    inner join int_search_docs as docs on scored.doc_id = docs.doc_id
    order by scored.score desc, docs.doc_id asc
    limit k
