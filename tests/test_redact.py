import pytest

from pipeline.redact import Redactor

GH = "ghp_" + "a1B2" * 9


@pytest.mark.parametrize("text,kind", [
    (f"token is {GH}", "github_token"),
    ("github_pat_" + "A1b2C3d4E5" * 4, "github_pat"),
    ("aws AKIAIOSFODNN7EXAMPLE key", "aws_access_key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----", "private_key"),
    ("xoxb-123456-789012-abcdefABCDEF", "slack_token"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
    ("password=hunter2!", "assignment"),
    ('api_key: "sk_abcdef123456"', "assignment"),
    ("postgres://app:s3cr3t@db.local:5432/app", "connection_string_password"),
])
def test_secrets_are_replaced_by_a_marker_naming_the_kind(text, kind):
    r = Redactor()
    out = r(text)
    assert f"[REDACTED:{kind}]" in out
    assert r.counts[kind] == 1
    for secret in ("hunter2", "s3cr3t", GH, "AKIAIOSFODNN7EXAMPLE", "abc\n"):
        assert secret not in out


@pytest.mark.parametrize("text", ["token=getToken()", "password = ${DB_PASSWORD}", "max_tokens=4096",
                                  "no secrets here", "api_key = API_KEY"])
def test_code_and_placeholders_are_left_alone(text):
    r = Redactor()
    assert r(text) == text and r.total == 0


def test_disabled_redactor_keeps_text():
    assert Redactor(enabled=False)(f"x {GH}") == f"x {GH}"


def test_a_known_token_format_wins_over_the_generic_assignment_it_sits_in():
    r = Redactor()
    assert r(f"export GITHUB_TOKEN={GH} and password=hunter2!") == \
        "export GITHUB_TOKEN=[REDACTED:github_token] and password=[REDACTED:assignment]"
    assert dict(r.counts) == {"github_token": 1, "assignment": 1}


def test_text_whose_lower_case_changes_length_is_still_redacted():
    r = Redactor()
    assert r(f"İstanbul {GH}") == "İstanbul [REDACTED:github_token]"


def test_long_text_without_anchors_is_returned_unchanged():
    text = "def f(x):\n    return x + 1\n" * 10_000
    assert Redactor()(text) is text


def test_a_large_text_seen_again_is_redacted_from_cache_and_still_counted():
    big = "system prompt line\n" * 400 + f"leaked {GH}\n"
    r = Redactor()
    first = r(big)
    assert r(big) == first and "[REDACTED:github_token]" in first
    assert r.counts["github_token"] == 2
    other = Redactor()
    assert other(big) == first and other.counts["github_token"] == 1
