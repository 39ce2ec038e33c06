from pipeline.transform.paths import normalize, project_name, project_root, relativize


def test_windows_paths_fold_drive_case_and_separators():
    assert normalize("C:\\Users\\dev\\app\\") == "c:/Users/dev/app"
    assert normalize("file:///c%3A/Users/dev/app") == "c:/Users/dev/app"
    assert normalize("/a//b/./c/") == "/a/b/c"
    assert normalize("vscode-remote://ssh-remote+box/home/x/") == "vscode-remote://ssh-remote+box/home/x"


def test_relativize_against_the_project_root():
    root = "C:\\Users\\dev\\webapp"
    for p in ("C:\\Users\\dev\\webapp\\src\\A.tsx", "c:/users/dev/webapp/src/A.tsx", "src\\A.tsx"):
        rel, inside = relativize(p, project_root(root, None), root)
        assert (rel.lower(), inside) == ("src/a.tsx", True)
    assert relativize("/etc/hosts", "/home/x", "/home/x") == ("/etc/hosts", False)
    assert relativize("../lib/a.py", "/home/x", "/home/x/app") == ("lib/a.py", True)


def test_project_names():
    assert project_name("/home/dev/acme-api", None) == "acme-api"
    assert project_name("/x", "acme/api") == "api"
    assert project_name("", None) == "(no project)"


def test_remote_workspaces_keep_their_uri_as_identity_but_files_are_relative():
    root = "vscode-remote://ssh-remote%2Bbox/home/x/app"
    assert project_root(root, None) == root
    assert relativize("/home/x/app/src/a.rs", root, root) == ("src/a.rs", True)
    assert relativize("vscode-remote://ssh-remote%2Bbox/home/x/app/README.md", root, None) == ("README.md", True)


def test_a_file_uri_whose_authority_holds_brackets_is_a_path_not_an_error():
    """urllib refuses a bracket in a URI's authority that is no IPv6 address (ValueError): a workspace folder's
    `file://user:[REDACTED:url_password]@/home/...`, once its credential is redacted, stopped the whole ingest."""
    assert normalize("file://dev:[REDACTED:url_password]@/home/ana/app") == "/home/ana/app"
    assert normalize("file://[REDACTED:github_token]@host/c%3A/work") == "c:/work"
    assert normalize("file://[not-closed") == ""
    assert normalize("file:///home/ana/app") == "/home/ana/app"
