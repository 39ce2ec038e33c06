-- dim_files: one row per file of a project that a tool call or session_files touched, from the
-- sessions' files (int_session_files, written by the star build), with how many sessions touched it.
-- A file belongs to the project of the sessions that touched it (its id is made of the two): an ingest
-- rebuilds the files of the projects its changed sessions belong to (before and after the change).
-- incremental: project_id
with

session_files as (
    select * from int_session_files
),

file_touches as (
    select * from fct_file_touches
),

tool_calls as (
    select * from fct_tool_calls
),

touched_files as (
    select file_id from file_touches
    union
    select file_id from tool_calls
    where file_id is not null
),

files as (
    -- project and path are what the file id is made of: the same in every session
    select
        session_files.file_id,
        min(session_files.project_id) as project_id,
        min(session_files.path) as path,
        bool_or(session_files.is_in_project) as is_in_project
    from session_files
    inner join touched_files on session_files.file_id = touched_files.file_id
    group by session_files.file_id
),

sessions_per_file as (
    select
        file_id,
        count(distinct session_id)::integer as n_sessions
    from file_touches
    group by file_id
),

files_with_counts as (
    select
        files.file_id,
        files.project_id,
        files.path,
        files.is_in_project,
        coalesce(sessions_per_file.n_sessions, 0) as n_sessions,
        lower(nullif(regexp_extract(files.path, '(?:^|/)[^/.][^/]*\.([A-Za-z0-9]+)$', 1), '')) as extension
    from files
    left join sessions_per_file on files.file_id = sessions_per_file.file_id
)

select * from files_with_counts
