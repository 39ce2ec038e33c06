"""Turn GitHub Copilot history (CLI and VS Code) into a DuckDB analytics warehouse."""

__version__ = "0.1.0"
