"""cron's ``%`` rule, both ways (Vixie cron / cronie do_command.c).

Reading: the first ``%`` not escaped by a backslash ends the command (``\\%`` in the command is a literal
``%``); the rest goes to the job's standard input, every ``%`` a newline, ``\\%`` a literal ``%``, other
backslashes kept, and a newline added at the end when the text written does not already end with one.
Writing (export) is the inverse where one exists; ``None`` means no crontab line gives this text back.
"""

from __future__ import annotations

DEBIAN = "debian"  # schedctl.timing.crondialect.DEBIAN, without importing the package here


def split_percent(text: str, dialect: str = "cronie") -> tuple[str, str | None]:
    """cron's % rule: (command, standard input as cron writes it, or None when it writes nothing).

    Debian's cron also collapses ``\\`` in the command to one backslash (cronie keeps both): Vixie cron 3.0's
    child_process() does ``if (ch == '%' || ch == '\\') *--p = ch;`` (as FreeBSD's copy of that do_command.c
    reads), where cronie's do_command.c tests only ``ch == '%'``. Debian's own patched source was not at hand
    (no deb-src here); its crontab(1) accepts such lines, and this is what issue 17 reports its daemon doing.
    """
    command: list[str] = []
    escaped = False
    for index, ch in enumerate(text):
        if escaped:
            if ch == "%":
                command[-1] = "%"  # the backslash that escaped it is dropped
            elif ch != "\\" or dialect != DEBIAN:
                command.append(ch)
            escaped = False
            continue
        if ch == "%":
            return "".join(command), stdin_as_cron_writes(text[index + 1 :])
        command.append(ch)
        escaped = ch == "\\"
    return "".join(command), None


def stdin_as_cron_writes(data: str) -> str | None:
    """do_command.c's translation: ``\\%`` -> ``%``, ``%`` -> newline, ``\\x`` -> ``\\x``; then a final newline."""
    if not data:
        return None  # cron writes nothing at all
    out: list[str] = []
    escaped = need_newline = False
    for ch in data:
        if escaped:
            if ch != "%":
                out.append("\\")
        elif ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            out.append(ch)
            need_newline = ch != "\n"
    if escaped:
        out.append("\\")
    if need_newline:
        out.append("\n")
    return "".join(out)


def encode_command(command: str, dialect: str = "cronie") -> str | None:
    """The command as written on a crontab line so cron reads back ``command``; None when impossible."""
    if dialect == DEBIAN:
        return _encode_debian(command)
    out: list[str] = []
    escaped = False  # whether cron's reader would be right after an escaping backslash
    for ch in command:
        if ch == "\n":
            return None
        if ch == "%":
            if escaped:
                return None  # an odd run of backslashes before a literal % cannot be written
            out.append("\\%")
            continue
        out.append(ch)
        escaped = ch == "\\" and not escaped
    return "".join(out)


def encode_stdin(stdin: str) -> tuple[str, bool] | None:
    """(text after the ``%``, exact). Not exact: cron will add a final newline ``stdin`` lacks."""
    candidates = [stdin[:-1], stdin] if stdin.endswith("\n") else [stdin]
    for candidate in candidates:
        raw = "".join("%" if c == "\n" else "\\%" if c == "%" else c for c in candidate)
        if stdin_as_cron_writes(raw) == stdin:
            return raw, True
    raw = "".join("%" if c == "\n" else "\\%" if c == "%" else c for c in stdin)
    if stdin_as_cron_writes(raw) == stdin + "\n":
        return raw, False
    return None


def _encode_debian(command: str) -> str | None:
    """Debian reads ``\\\\`` as one backslash: double each backslash that a backslash, a ``%`` or the line's end
    follows, so every other backslash stays as the reader wrote it."""
    if "\n" in command:
        return None
    out: list[str] = []
    for index, ch in enumerate(command):
        if ch == "%":
            out.append("\\%")
        elif ch == "\\" and (index + 1 == len(command) or command[index + 1] in "\\%"):
            out.append("\\\\")
        else:
            out.append(ch)
    text = "".join(out)
    return text if split_percent(text, DEBIAN) == (command, None) else None
