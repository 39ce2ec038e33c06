-- int_mention_words: the words of prompts and of checkpoints' important_files that could name a file,
-- one row per session x text x word; report_file_importance matches them against file paths.
-- Built for the sessions in _model_scope (all of them on a full build, the changed ones otherwise),
-- so an incremental ingest extracts the words of the sessions it changed only.
with sessions as (
    select
        session_id,
        project_id
    from dim_sessions
    where session_id in (select _model_scope.session_id from _model_scope)
),

words as (
    select distinct
        'prompt' as source,
        sessions.project_id,
        turns.session_id,
        turns.turn_index::varchar as ref,
        rtrim(unnest(regexp_extract_all(lower(turns.user_message), '[a-z0-9_./-]+')), './-') as word
    from fct_turns as turns
    inner join sessions on turns.session_id = sessions.session_id
    union all
    select distinct
        'checkpoint' as source,
        sessions.project_id,
        cp.session_id,
        cp.checkpoint_number::varchar as ref,
        rtrim(unnest(regexp_extract_all(lower(cp.important_files), '[a-z0-9_./-]+')), './-') as word
    from fct_checkpoints as cp
    inner join sessions on cp.session_id = sessions.session_id
)

select * from words
