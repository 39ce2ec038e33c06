-- file ids resolve to dim_files, project ids to dim_projects
with file_refs as (
    select
        'fct_file_touches' as from_table,
        file_id
    from fct_file_touches
    union all
    select
        'fct_tool_calls' as from_table,
        file_id
    from fct_tool_calls
    where file_id is not null
),

project_refs as (
    select
        'dim_sessions' as from_table,
        project_id
    from dim_sessions
    union all
    select
        'dim_files' as from_table,
        project_id
    from dim_files
),

missing_files as (
    select
        file_refs.from_table,
        file_refs.file_id as id
    from file_refs
    anti join dim_files on file_refs.file_id = dim_files.file_id
),

missing_projects as (
    select
        project_refs.from_table,
        project_refs.project_id as id
    from project_refs
    anti join dim_projects on project_refs.project_id = dim_projects.project_id
)

select * from missing_files
union all
select * from missing_projects
