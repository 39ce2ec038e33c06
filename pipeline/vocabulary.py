"""Names shared by the readers and the transforms: event types, the tool taxonomy and the tags
Copilot injects into prompts.

One tool goes by a different name in each client (the CLI's ``view`` is VS Code's ``read_file``,
``edit`` is ``replace_string_in_file`` or ``str_replace_editor``, ``bash`` is ``run_in_terminal``
or ``powershell``); ``tool_family`` puts them back together so "which tools do I use" counts one
tool once.
"""

from __future__ import annotations

import re

# ------------------------------------------------------------------------------------ event types
# Event types the star schema models. Anything else is counted as unknown and kept in stg_events.
USER_MESSAGE = "user.message"
ASSISTANT_MESSAGE = "assistant.message"
ASSISTANT_REASONING = "assistant.reasoning"
TOOL_START = "tool.execution_start"
TOOL_COMPLETE = "tool.execution_complete"
TOOL_END = "tool.execution_end"  # the seed note's name for tool.execution_complete
SESSION_START = "session.start"
SESSION_RESUME = "session.resume"
SESSION_SHUTDOWN = "session.shutdown"
SESSION_ERROR = "session.error"
ABORT = "abort"
BINARY_ASSET = "session.binary_asset"  # an image a prompt or a tool result carries, base64
COMPACTION_COMPLETE = "session.compaction_complete"
SYSTEM_MESSAGE = "system.message"
ASSISTANT_USAGE = "assistant.usage"
USAGE_CHECKPOINT = "session.usage_checkpoint"
MODEL_CHANGE = "session.model_change"
AUTO_RESOLVED = "session.auto_mode_resolved"
TURN_START = "assistant.turn_start"
SESSION_INFO = "session.info"
SUBAGENT_STARTED = "subagent.started"
SKILL_INVOKED = "skill.invoked"
FILE_EDITED = "vscode.file_edited"  # synthesized by the VS Code reader: one entry of a request's editedFileEvents
TOOL_COMPLETIONS = (TOOL_COMPLETE, TOOL_END)

KNOWN_TYPES = frozenset({
    USER_MESSAGE, ASSISTANT_MESSAGE, ASSISTANT_REASONING, TOOL_START, TOOL_COMPLETE, TOOL_END,
    SESSION_START, SESSION_RESUME, SESSION_SHUTDOWN, SESSION_ERROR, COMPACTION_COMPLETE,
    "session.info", "session.warning", "session.model_change", "session.mode_changed", "session.plan_changed",
    "session.task_complete", "session.workspace_file_changed", "session.context_changed",
    "session.compaction_start", "session.truncation", "session.usage_checkpoint", "session.handoff",
    "session.auto_mode_resolved", "session.context_cleared", "session.title_changed", "session.permissions_changed",
    "assistant.turn_start", "assistant.turn_end", "system.message", "system.notification", ABORT,
    "tool.user_requested", SKILL_INVOKED, "hook.start", "hook.end", "subagent.started",
    "subagent.completed", "subagent.failed", "subagent.selected", "subagent.deselected",
    "permission.requested", "permission.completed", "external_tool.requested", "external_tool.completed",
    FILE_EDITED, BINARY_ASSET,
})
# Event types whose `content` is reasoning text: never stored.
REASONING_TYPES = frozenset({ASSISTANT_REASONING, "assistant.reasoning_delta"})


# ------------------------------------------------------------------------------------ tools
# Tools that touch one file, by what they do to it (fct_file_touches.action).
VIEW_TOOLS = frozenset({"view", "read", "read_file", "view_file", "open_file", "readfile", "copilot_readfile",
                        "get_file", "read_notebook_cell_output"})
EDIT_TOOLS = frozenset({"edit", "str_replace", "edit_file", "replace_string_in_file", "multi_replace_string_in_file",
                        "insert_edit_into_file", "apply_patch", "insert", "multiedit", "multi_edit",
                        "copilot_applypatch", "copilot_replacestring", "copilot_insertedit",
                        "copilot_multireplacestring", "edit_notebook_file"})
CREATE_TOOLS = frozenset({"create", "create_file", "write_file", "write", "new_file", "copilot_createfile",
                          "create_new_jupyter_notebook", "create_directory"})
# str_replace_editor's `command` decides what it did to its file
EDITOR_COMMANDS = {"view": "view", "create": "create", "str_replace": "edit", "insert": "edit",
                   "undo_edit": "edit", "write": "create"}

# tool_family: what a tool call was for, whatever the client called the tool.
TOOL_FAMILIES = ("read", "edit", "create", "search", "shell", "web", "agent", "mcp", "other")
_FAMILY_NAMES = {
    "read": VIEW_TOOLS | {"list_dir", "list_directory", "ls", "read_many_files", "get_changed_files",
                          "read_agent", "copilot_listdirectory", "copilot_readnotebookcelloutput"},
    "edit": EDIT_TOOLS | {"str_replace_editor"},
    "create": CREATE_TOOLS,
    "search": {"grep", "glob", "rg", "grep_search", "file_search", "semantic_search", "search", "codebase_search",
               "find", "find_files", "list_code_usages", "search_code", "copilot_searchcodebase",
               "copilot_findfiles", "copilot_findtextinfiles", "search_workspace_symbols"},
    "shell": {"bash", "powershell", "run_in_terminal", "shell", "run_command", "execute_command", "cmd",
              "read_bash", "write_bash", "stop_bash", "list_bash", "read_powershell", "write_powershell",
              "stop_powershell", "list_powershell", "get_terminal_output", "run_task", "run_vscode_command",
              "copilot_runinterminal", "runinterminal", "terminal_last_command", "run_tests",
              "installpythonpackage", "configurepythonenvironment"},
    "web": {"web_fetch", "web_search", "fetch", "fetch_webpage", "open_simple_browser", "browser",
            "copilot_fetchwebpage", "github_repo"},
    "agent": {"task", "runsubagent", "run_subagent", "subagent", "agent", "launch_agent", "explore",
              "general-purpose", "code-review"},
}
_FAMILY_OF = {name: family for family, names in _FAMILY_NAMES.items() for name in names}
_MCP_NAME = re.compile(r"^(?:mcp__|mcp_|github-mcp-server-)")


def tool_family(name: str | None, mcp_server: str | None = None) -> str | None:
    """The family of a tool call (one of ``TOOL_FAMILIES``); None for a call with no tool name."""
    if not name:
        return None
    low = name.strip().lower()
    short = re.sub(r"^.*[/]", "", low)  # `functions/bash`, `copilot/read_file`
    family = _FAMILY_OF.get(short)
    if family is not None:
        return family
    if mcp_server or _MCP_NAME.match(short):
        return "mcp"
    return "other"


# Blocks Copilot appends to (or wraps around) what the user typed. Only the text outside them is the
# prompt: `content` ends with `<current_datetime>…</current_datetime>` in older CLIs, and VS Code-driven
# sessions put `<reminder>` and `<context>` blocks after the typed text, then repeat it in `<userRequest>`.
INJECTED_TAGS = ("current_datetime", "reminder", "system_reminder", "system-reminder", "tools_changed_notice",
                 "context", "environment_info", "workspace_info", "editorContext", "attachments")
_TRAILING_BLOCK = re.compile(r"<(?P<tag>" + "|".join(map(re.escape, INJECTED_TAGS)) + r")>(?:(?!<(?P=tag)>).)*?"
                             r"</(?P=tag)>\s*\Z", re.S)
TAIL_CHARS = 64 * 1024
_USER_REQUEST = re.compile(r"<userRequest>\s*(?P<text>.*?)\s*</userRequest>\s*\Z", re.S)


def clean_prompt(text: str | None) -> str | None:
    """What the user typed: Copilot's injected blocks at the end of a prompt removed, the
    `<userRequest>` wrapper unwrapped. An empty result is not a prompt (Copilot's own nudge)."""
    if text is None:
        return None
    body = text.rstrip()
    if body.endswith("</userRequest>"):
        tail = len(body) - min(len(body), TAIL_CHARS)
        wrapped = _USER_REQUEST.search(body, tail)
        if wrapped is not None:
            body = wrapped.group("text")
    while body.endswith(">"):
        # injected blocks are short: only the end of a long text is searched, so a huge prompt
        # costs the same as a short one
        m = _TRAILING_BLOCK.search(body, len(body) - min(len(body), TAIL_CHARS))
        if m is None:
            break
        body = body[:m.start()].rstrip()
    return body.strip()
