-- tokenize(text): code-aware words. camelCase and HTTPResponse are split, then everything that is
-- not a letter or digit separates words (snake_case, paths, dots); lower case; 2+ characters.
create or replace macro tokenize(t) as list_filter(
    string_split_regex(
        lower(
            regexp_replace(
                regexp_replace(coalesce(t, ''), '([a-z0-9])([A-Z])', '\1 \2', 'g'),
                '([A-Z]+)([A-Z][a-z])', '\1 \2', 'g'
            )
        ),
        '[^a-z0-9]+'
    ),
    lambda x: length(x) > 1
)
