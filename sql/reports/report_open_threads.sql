-- report_open_threads: one row per session whose checkpoints name next steps: those of its latest
-- such checkpoint, i.e. where the session left off
-- incremental: session_id
with

session_checkpoints as (
    select * from fct_checkpoints
),

sessions as (
    select * from dim_sessions
),

latest_with_next_steps as (
    select
        session_id,
        checkpoint_number,
        title,
        next_steps,
        row_number() over (partition by session_id order by checkpoint_number desc) as recency
    from session_checkpoints
    where next_steps is not null
),

threads as (
    select
        sessions.project_id,
        latest.session_id,
        sessions.title as session_title,
        latest.checkpoint_number,
        latest.title,
        latest.next_steps,
        sessions.started_at
    from latest_with_next_steps as latest
    inner join sessions on latest.session_id = sessions.session_id
    where latest.recency = 1
)

select * from threads
