-- dim_projects: one row per project, from the sessions that ran in it. Repository and root path
-- are those of the latest session that names one; ties are broken by a fixed order, so the same
-- sessions give the same rows whatever order their files were read in. A project's row is its sessions':
-- an ingest rebuilds the projects its changed sessions belong to (before and after the change).
-- incremental: project_id
with

sessions as (
    select * from dim_sessions
),

latest as (
    select
        project_id,
        first(repository order by started_at desc nulls last, session_id asc)
        filter (where repository is not null and repository != '') as repository,
        first(root_path order by started_at desc nulls last, session_id asc)
        filter (where root_path is not null and root_path != '') as root_path,
        count(*)::integer as n_sessions,
        min(started_at) as first_seen_at,
        max(coalesce(ended_at, started_at)) as last_seen_at
    from sessions
    group by project_id
),

projects as (
    select
        project_id,
        repository,
        root_path,
        n_sessions,
        first_seen_at,
        last_seen_at,
        coalesce(
            nullif(regexp_extract(rtrim(repository, '/'), '[^/]*$'), ''),
            nullif(regexp_extract(rtrim(root_path, '/'), '[^/]*$'), ''),
            nullif(root_path, ''),
            '(no project)'
        ) as name
    from latest
)

select * from projects
