-- report_session_files: one row per session x file path, with what the session did to the file
-- incremental: session_id
with

file_touches as (
    select * from fct_file_touches
),

files as (
    select * from dim_files
),

per_session as (
    select
        file_touches.session_id,
        files.path,
        string_agg(file_touches.action, ', ' order by file_touches.action) as actions,
        sum(file_touches.n_touches) as n_touches,
        min(file_touches.first_seen_at) as first_seen_at
    from file_touches
    inner join files on file_touches.file_id = files.file_id
    group by file_touches.session_id, files.path
)

select * from per_session
