"""The importer's findings as compiler-style lines: ``FILE:LINE: error: reason`` / ``FILE:LINE: warning: reason``.

``Diagnostic.__str__`` leaves "error:" out (the TOML loader's convention); a crontab import always names the
severity, so a reader can tell the lines that stop an import from the ones that only inform.
"""

from __future__ import annotations

from schedctl.errors import Diagnostic

ERROR = "error"
WARNING = "warning"


def error(file: str, line: int | None, message: str) -> Diagnostic:
    return Diagnostic(file=file, line=line, message=message, severity=ERROR)


def warning(file: str, line: int | None, message: str) -> Diagnostic:
    return Diagnostic(file=file, line=line, message=message, severity=WARNING)


def render(diagnostic: Diagnostic) -> str:
    where = diagnostic.file if diagnostic.line is None else f"{diagnostic.file}:{diagnostic.line}"
    return f"{where}: {diagnostic.severity}: {diagnostic.message}"


def errors_in(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity == ERROR]


def one_line(text: str, limit: int = 300) -> str:
    """A message must stay on its line whatever a crontab holds: control characters are shown escaped."""
    shown = "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
