-- tokenize(text): code-aware words in any script. camelCase and HTTPResponse are split, then everything
-- that is not a letter or digit separates words (snake_case, paths, dots); lower case; 2+ characters.
-- Chinese, Japanese and Korean are written without spaces: each run of those characters gives its
-- character bigrams (修复登录 -> 修复, 复登, 登录), the usual way to index CJK text without a dictionary.
create or replace macro tokenize(t) as list_concat(
    list_filter(
        string_split_regex(
            lower(
                regexp_replace(
                    regexp_replace(
                        regexp_replace(coalesce(t, ''), '[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+', ' ', 'g'),
                        '([a-z0-9])([A-Z])', '\1 \2', 'g'
                    ),
                    '([A-Z]+)([A-Z][a-z])', '\1 \2', 'g'
                )
            ),
            '[^\p{L}\p{N}]+'
        ),
        lambda x: length(x) > 1
    ),
    flatten(
        list_transform(
            regexp_extract_all(coalesce(t, ''), '[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]{2,}'),
            lambda r: list_transform(range(1, length(r)), lambda i: substr(r, i, 2))
        )
    )
)
