-- reports are built whenever there is something to report on
with expectations as (
    select
        'report_session_stats' as report,
        (select count(*) from dim_sessions) as n_inputs,
        (select count(*) from report_session_stats) as n_rows
    union all
    select
        'report_file_importance' as report,
        (
            select count(*) from fct_file_touches
            inner join dim_files on fct_file_touches.file_id = dim_files.file_id
            where dim_files.is_in_project
        ) as n_inputs,
        (select count(*) from report_file_importance) as n_rows
    union all
    select
        'report_topics' as report,
        (select count(*) from int_topic_terms) as n_inputs,
        (select count(*) from report_topics) as n_rows
    union all
    select
        'report_activity_daily' as report,
        (
            select count(*) from dim_sessions
            where started_at is not null
        ) as n_inputs,
        (select count(*) from report_activity_daily) as n_rows
    union all
    select
        'int_search_docs' as report,
        (select count(*) from fct_turns) as n_inputs,
        (select count(*) from int_search_docs) as n_rows
)

select * from expectations
where n_inputs > 0 and n_rows = 0
