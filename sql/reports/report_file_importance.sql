-- report_file_importance: one row per file; which files matter, per project.
-- score = 1.0 * n_sessions + 0.5 * n_edits + 1.0 * n_creates + 0.25 * n_views + 0.5 * n_days
--       + 2.0 * recency + 1.0 * n_prompt_mentions + 1.0 * n_checkpoint_mentions
-- recency = sum over touching sessions of 0.5 ^ (age_days / 30), age measured from the
-- project's latest touch, so the score of an old project does not decay to nothing.
-- A prompt (or a checkpoint's important_files) mentions a file when one of its words is the file's
-- path, its file name, or its stem (file name without extension) of 6+ characters.
-- A file belongs to the project of the sessions that touched it (its id is made of the two), so a project's
-- rows are computed from its own files, touches and words: an ingest rebuilds the projects its changed
-- sessions belong to (before and after the change).
-- incremental: project_id
with

project_files as (
    select * from dim_files
),

file_touches as (
    select * from fct_file_touches
),

mention_words as (
    select * from int_mention_words
),

files as (
    select
        file_id,
        project_id,
        path,
        lower(regexp_extract(path, '[^/]+$')) as file_name,
        lower(regexp_replace(regexp_extract(path, '[^/]+$'), '\.[^.]*$', '')) as stem
    from project_files
    where is_in_project
),

touches as (
    select
        touches.session_id,
        touches.file_id,
        touches.action,
        touches.n_touches,
        touches.first_seen_at,
        touches.last_seen_at,
        files.project_id
    from file_touches as touches
    inner join files on touches.file_id = files.file_id
),

project_latest as (
    select
        project_id,
        max(last_seen_at) as latest_at
    from touches
    group by project_id
),

session_touches as (
    select
        touches.file_id,
        touches.session_id,
        max(touches.last_seen_at) as last_seen_at,
        min(touches.first_seen_at) as first_seen_at,
        any_value(project_latest.latest_at) as latest_at
    from touches
    inner join project_latest on touches.project_id = project_latest.project_id
    group by touches.file_id, touches.session_id
),

touch_counts as (
    select
        file_id,
        count(distinct session_id)::integer as n_sessions,
        coalesce(sum(n_touches) filter (where action = 'edit'), 0)::integer as n_edits,
        coalesce(sum(n_touches) filter (where action = 'create'), 0)::integer as n_creates,
        coalesce(sum(n_touches) filter (where action = 'view'), 0)::integer as n_views,
        count(distinct timezone('UTC', first_seen_at)::date)::integer as n_days,
        min(first_seen_at) as first_seen_at,
        max(last_seen_at) as last_seen_at
    from touches
    group by file_id
),

recency as (
    select
        file_id,
        sum(
            pow(0.5, coalesce(date_diff('second', last_seen_at, latest_at), 0) / 86400.0 / 30)
        ) as recency
    from session_touches
    group by file_id
),

-- words of prompts and of checkpoints' important_files that could name a file: int_mention_words
words as (
    select
        source,
        project_id,
        session_id,
        ref,
        word
    from mention_words
),

-- a word names a file by its path, its file name, or (in prompts) its stem of 6+ characters
mentions as (
    select
        files.file_id,
        words.source,
        words.session_id,
        words.ref
    from files
    inner join words on files.project_id = words.project_id and lower(files.path) = words.word
    union all
    select
        files.file_id,
        words.source,
        words.session_id,
        words.ref
    from files
    inner join words
        on files.project_id = words.project_id and files.file_name = regexp_extract(words.word, '[^/]+$')
    union all
    select
        files.file_id,
        words.source,
        words.session_id,
        words.ref
    from files
    inner join words
        on
            files.project_id = words.project_id and files.stem = words.word
            and length(files.stem) >= 6 and words.source = 'prompt'
),

mention_counts as (
    select
        file_id,
        (count(distinct session_id || ':' || ref) filter (where source = 'prompt'))::integer as n_prompt_mentions,
        (count(distinct session_id || ':' || ref) filter (where source = 'checkpoint'))::integer
            as n_checkpoint_mentions
    from mentions
    group by file_id
),

components as (
    select
        files.project_id,
        files.file_id,
        files.path,
        touch_counts.n_sessions,
        touch_counts.n_edits,
        touch_counts.n_creates,
        touch_counts.n_views,
        touch_counts.n_days,
        touch_counts.first_seen_at,
        touch_counts.last_seen_at,
        round(recency.recency, 4) as recency,
        coalesce(mention_counts.n_prompt_mentions, 0) as n_prompt_mentions,
        coalesce(mention_counts.n_checkpoint_mentions, 0) as n_checkpoint_mentions
    from files
    inner join touch_counts on files.file_id = touch_counts.file_id
    inner join recency on files.file_id = recency.file_id
    left join mention_counts on files.file_id = mention_counts.file_id
),

scored as (
    select
        *,
        round(
            1.0 * n_sessions + 0.5 * n_edits + 1.0 * n_creates + 0.25 * n_views + 0.5 * n_days
            + 2.0 * recency + 1.0 * n_prompt_mentions + 1.0 * n_checkpoint_mentions,
            4
        ) as score
    from components
),

ranked as (
    select
        project_id,
        file_id,
        path,
        score,
        n_sessions,
        n_edits,
        n_creates,
        n_views,
        n_days,
        recency,
        n_prompt_mentions,
        n_checkpoint_mentions,
        first_seen_at,
        last_seen_at,
        row_number() over (partition by project_id order by score desc, path asc)::integer as rank
    from scored
)

select * from ranked
