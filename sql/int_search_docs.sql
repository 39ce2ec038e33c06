-- int_search_docs: one row per searchable text (prompt, answer, checkpoint, memory) of the sessions
-- in _model_scope (all of them on a full build, the changed ones on an incremental ingest), plus the
-- memories that belong to no session
with sessions as (
    select
        session_id,
        project_id,
        title
    from dim_sessions
),

prompts as (
    select
        'prompt:' || turns.session_id || ':' || turns.turn_index as doc_id,
        turns.session_id,
        'prompt' as kind,
        turns.turn_index::varchar as ref,
        turns.user_message as text,
        turns.started_at as written_at
    from fct_turns as turns
    where coalesce(trim(turns.user_message), '') != ''
),

answers as (
    select
        'answer:' || turns.session_id || ':' || turns.turn_index as doc_id,
        turns.session_id,
        'answer' as kind,
        turns.turn_index::varchar as ref,
        turns.assistant_response as text,
        coalesce(turns.ended_at, turns.started_at) as written_at
    from fct_turns as turns
    where coalesce(trim(turns.assistant_response), '') != ''
),

checkpoints as (
    select
        'checkpoint:' || cp.session_id || ':' || cp.checkpoint_number as doc_id,
        cp.session_id,
        'checkpoint' as kind,
        cp.checkpoint_number::varchar as ref,
        concat_ws(
            chr(10), cp.title, cp.overview, cp.history, cp.work_done, cp.technical_details,
            cp.important_files, cp.next_steps
        ) as text,
        cp.created_at as written_at
    from fct_checkpoints as cp
),

memories as (
    select
        'memory:' || mem.memory_id as doc_id,
        mem.session_id,
        'memory' as kind,
        mem.path as ref,
        mem.content as text,
        null::timestamp as written_at
    from fct_memories as mem
    where coalesce(trim(mem.content), '') != ''
),

all_docs as (
    select * from prompts
    union all
    select * from answers
    union all
    select * from checkpoints
    union all
    select * from memories
),

docs_with_sessions as (
    select
        all_docs.doc_id,
        all_docs.session_id,
        sessions.project_id,
        all_docs.kind,
        all_docs.ref,
        all_docs.text,
        all_docs.written_at,
        -- the token count, set from int_search_terms (sql/after/int_search_terms.sql)
        0 as n_terms,
        case when all_docs.kind = 'memory' then all_docs.ref else sessions.title end as title
    from all_docs
    left join sessions on all_docs.session_id = sessions.session_id
    where
        all_docs.session_id is null
        or all_docs.session_id in (select _model_scope.session_id from _model_scope)
)

select * from docs_with_sessions
