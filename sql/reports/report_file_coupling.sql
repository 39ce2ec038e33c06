-- report_file_coupling: one row per pair of files edited or created in the same sessions
-- (temporal coupling as in code-maat): degree = 100 * shared / average(n_sessions_a, n_sessions_b).
-- As code-maat's --max-changeset-size (default 30), a session that changed more than 30 files is left
-- out: a bulk edit couples everything, and its pairs grow as the square of its files (one session
-- editing 8,000 files made 33 million pairs and took a minute). A session's files are all of its project: the
-- rows of the projects an ingest's changed sessions belong to (before and after) are rebuilt, the rest kept.
-- incremental: project_id
with

file_touches as (
    select * from fct_file_touches
),

files as (
    select * from dim_files
),

all_changes as (
    select distinct
        touches.session_id,
        touches.file_id,
        files.project_id,
        files.path
    from file_touches as touches
    inner join files on touches.file_id = files.file_id
    where touches.action in ('edit', 'create') and files.is_in_project
),

changesets as (
    select *
    from all_changes
    qualify count(*) over (partition by session_id) <= 30
),

sessions_per_file as (
    select
        file_id,
        count(*)::integer as n_sessions
    from changesets
    group by file_id
),

pairs as (
    select
        a.project_id,
        a.file_id as file_id_a,
        a.path as path_a,
        b.file_id as file_id_b,
        b.path as path_b,
        count(*)::integer as shared_sessions
    from changesets as a
    inner join changesets as b
        on a.session_id = b.session_id and a.project_id = b.project_id and a.path < b.path
    group by a.project_id, a.file_id, a.path, b.file_id, b.path
),

pairs_with_degree as (
    select
        pairs.project_id,
        pairs.file_id_a,
        pairs.path_a,
        pairs.file_id_b,
        pairs.path_b,
        pairs.shared_sessions,
        sa.n_sessions as n_sessions_a,
        sb.n_sessions as n_sessions_b,
        round(100.0 * pairs.shared_sessions / ((sa.n_sessions + sb.n_sessions) / 2.0), 2) as degree
    from pairs
    inner join sessions_per_file as sa on pairs.file_id_a = sa.file_id
    inner join sessions_per_file as sb on pairs.file_id_b = sb.file_id
)

select * from pairs_with_degree
