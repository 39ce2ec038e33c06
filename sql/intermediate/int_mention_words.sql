-- int_mention_words: the words of prompts and of checkpoints' important_files that could name a file,
-- one row per session x text x word; report_file_importance matches them against file paths.
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

words as (
    select distinct
        'prompt' as source,
        sessions.project_id,
        turns.session_id,
        turns.turn_index::varchar as ref,
        rtrim(unnest(regexp_extract_all(lower(turns.user_message), '[a-z0-9_./-]+')), './-') as word
    from turns
    inner join sessions on turns.session_id = sessions.session_id
    union all
    select distinct
        'checkpoint' as source,
        sessions.project_id,
        cp.session_id,
        cp.checkpoint_number::varchar as ref,
        rtrim(unnest(regexp_extract_all(lower(cp.important_files), '[a-z0-9_./-]+')), './-') as word
    from session_checkpoints as cp
    inner join sessions on cp.session_id = sessions.session_id
)

select * from words
