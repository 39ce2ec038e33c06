-- int_topic_terms: one row per session x text source x term; code-aware words and adjacent-word
-- bigrams from prompts, titles and checkpoints, stopwords, numbers and 1-2 letter words removed.
-- Source weights: titles 2 (a session title or checkpoint title names the topic), the rest 1.
-- incremental: session_id
with

sessions as (
    select * from dim_sessions
),

turns as (
    select * from fct_turns
),

session_checkpoints as (
    select * from fct_checkpoints
),

stopwords as (
    select * from int_stopwords
),

first_prompts as (
    select
        session_id,
        regexp_replace(user_message, '\s+', ' ', 'g') as prompt
    from turns
    where turn_index = 0
),

texts as (
    select
        session_id,
        'prompt' as source,
        'p' || turn_index as text_id,
        user_message as text
    from turns
    union all
    -- a title that is only the first prompt cut short would count that prompt twice
    select
        sessions.session_id,
        'title' as source,
        't' as text_id,
        sessions.title as text
    from sessions
    left join first_prompts on sessions.session_id = first_prompts.session_id
    where not coalesce(starts_with(first_prompts.prompt, rtrim(sessions.title, '…')), false)
    union all
    select
        session_id,
        'checkpoint_title' as source,
        'ct' || checkpoint_number as text_id,
        title as text
    from session_checkpoints
    union all
    select
        session_id,
        'checkpoint_overview' as source,
        'co' || checkpoint_number as text_id,
        overview as text
    from session_checkpoints
),

token_lists as (
    select
        session_id,
        source,
        text_id,
        tokenize(text) as tokens
    from texts
    where text is not null
),

positioned as (
    select
        session_id,
        source,
        text_id,
        unnest(tokens) as term,
        generate_subscripts(tokens, 1) as pos
    from token_lists
),

words as (
    select positioned.*
    from positioned
    anti join stopwords on positioned.term = stopwords.term
    where
        (length(positioned.term) >= 3 or regexp_matches(positioned.term, '[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]'))
        and not regexp_full_match(positioned.term, '[0-9]+')
),

bigrams as (
    select
        session_id,
        source,
        text_id,
        term || ' ' || lead(term) over (partition by session_id, source, text_id order by pos) as term,
        lead(pos) over (partition by session_id, source, text_id order by pos) - pos as gap
    from words
),

all_terms as (
    select
        session_id,
        source,
        term
    from words
    union all
    select
        session_id,
        source,
        term
    from bigrams
    -- CJK bigrams overlap already: no pairs of them
    where gap = 1 and not regexp_matches(term, '[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]')
),

counted as (
    select
        sessions.project_id,
        all_terms.session_id,
        all_terms.source,
        all_terms.term,
        count(*)::integer as n,
        count(*)
        * case when all_terms.source in ('title', 'checkpoint_title') then 2.0 else 1.0 end as weight,
        any_value(sessions.started_at) as session_started_at
    from all_terms
    inner join sessions on all_terms.session_id = sessions.session_id
    group by sessions.project_id, all_terms.session_id, all_terms.source, all_terms.term
)

select * from counted
