-- int_search_docs: one row per searchable text (prompt, answer, checkpoint, memory), with its
-- length in tokens (BM25's document length)
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

session_memories as (
    select * from fct_memories
),

prompts as (
    select
        'prompt:' || turns.session_id || ':' || turns.turn_index as doc_id,
        turns.session_id,
        'prompt' as kind,
        turns.turn_index::varchar as ref,
        turns.user_message as text,
        turns.started_at as written_at
    from turns
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
    from turns
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
    from session_checkpoints as cp
),

memories as (
    select
        'memory:' || mem.memory_id as doc_id,
        mem.session_id,
        'memory' as kind,
        mem.path as ref,
        mem.content as text,
        null::timestamp as written_at
    from session_memories as mem
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
        len(tokenize(all_docs.text)) as n_terms,
        case when all_docs.kind = 'memory' then all_docs.ref else sessions.title end as title
    from all_docs
    left join sessions on all_docs.session_id = sessions.session_id
    where all_docs.session_id is null or sessions.session_id is not null
)

select * from docs_with_sessions
