"""Readable, stable job ids from commands: ``/usr/local/bin/backup-db --full`` -> ``backup-db``.

The same crontab always gives the same ids (no counters, no hashes of line numbers), so importing it again, or
importing what ``schedctl export`` wrote, finds the jobs already there. Clashes get ``-2``, ``-3`` in file order.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

MAX_LENGTH = 48
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
# Segments that only set the stage for the real command.
_GUARDS = {
    "test",
    "[",
    "[[",
    "cd",
    "true",
    ":",
    "sleep",
    "{",
    "}",
    "if",
    "then",
    "fi",
    "export",
    "umask",
    "source",
    ".",
    "set",
    "ulimit",
}
# Programs that run another program: the id names the one they run.
_WRAPPERS = {
    "command",  # `command X` runs X (but `command -v X` is a check: see _name_of)
    "nice",
    "ionice",
    "nohup",
    "timeout",
    "env",
    "exec",
    "chronic",
    "cronic",
    "flock",
    "sudo",
    "time",
    "stdbuf",
    "setlock",
    "run-one",
    "systemd-cat",
    "caffeinate",
    "taskset",
    "chrt",
    "lockrun",
    "xargs",
}
_WRAPPER_VALUE_OPTIONS = {
    "nice": {"-n"},
    "ionice": {"-c", "-n"},
    "sudo": {"-u", "-g"},
    "timeout": {"-s", "-k"},
    "flock": {"-w", "-E"},
    "chrt": {"-p"},
    "stdbuf": {"-i", "-o", "-e"},
    "taskset": {"-p"},
}
_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "exec"}
_PUNCTUATION = set("();<>|&")
_WRAPPER_POSITIONALS = {"timeout": 1, "flock": 1, "setlock": 1, "taskset": 1, "chrt": 1}
_INTERPRETERS = {
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "php",
    "node",
    "rscript",
    "deno",
    "bun",
    "pwsh",
    "java",
    "uv",
    "poetry",
    "pipenv",
}
# Tools whose first argument is what the job does.
_SUBCOMMANDS = {
    "docker",
    "podman",
    "kubectl",
    "git",
    "systemctl",
    "make",
    "npm",
    "yarn",
    "pnpm",
    "composer",
    "artisan",
    "manage",
    "rake",
    "bundle",
    "certbot",
    "aws",
    "gcloud",
    "gsutil",
    "wp",
    "drush",
    "occ",
    "console",
    "apt-get",
    "apt",
    "psql",
    "mysql",
    "redis-cli",
    "borg",
    "restic",
    "rclone",
    "ansible-playbook",
    "terraform",
    "helm",
    "rails",
    "run",
    "cargo",
    "go",
    "mix",
    "dotnet",
    "invoke",
    "fab",
    "just",
    "task",
}
# Tools whose first path says what the job is about: `find /home/alice/Downloads ...` -> find-downloads.
_PATH_TOOLS = {"find", "rsync", "rm", "du", "chown", "chmod", "cp", "mv", "tmpreaper", "tmpwatch", "fdupes"}
_EXTENSIONS = re.compile(r"\.(sh|bash|py|pl|rb|php|js|mjs|ts|jar|ps1|exe)$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def derive_id(command: str) -> str:
    # Expansions are arguments, never the program: `sleep $((RANDOM % 60)); curl ...` names curl.
    words = _words(re.sub(r"\$\(\([^()]*\)\)|\$\([^()]*\)|`[^`]*`", "x", command))
    run_parts = _run_parts(words)
    if run_parts:
        return run_parts
    for segment in _segments(words):
        name = _name_of(segment)
        if name:
            return name
    return slug(command) or "job"


def slug(text: str) -> str:
    """Lower-case letters and digits joined by single dashes, at most MAX_LENGTH, cut at a dash."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(out) > MAX_LENGTH:
        out = out[:MAX_LENGTH]
        out = out.rsplit("-", 1)[0] if "-" in out else out
    return out


def dedupe(wanted: Iterable[str], taken: Iterable[str] = ()) -> list[str]:
    """``wanted`` made unique, in order: a repeat of ``x`` becomes ``x-2``, then ``x-3`` (skipping taken ones)."""
    used = set(taken)
    out = []
    for base in wanted:
        candidate, n = base, 1
        while candidate in used:
            n += 1
            candidate = f"{base}-{n}"
        used.add(candidate)
        out.append(candidate)
    return out


def _words(command: str) -> list[str]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:  # unbalanced quotes: words are still a fine guess
        return command.split()


def _run_parts(words: list[str]) -> str | None:
    if not any(_base(w) == "run-parts" for w in words):
        return None
    start = next(i for i, w in enumerate(words) if _base(w) == "run-parts")
    for word in words[start + 1 :]:
        if word in _SEPARATORS:
            break
        if word.startswith("/"):
            return slug(f"run-parts {word}")
    return "run-parts"


def _segments(words: list[str]) -> list[list[str]]:
    """Simple commands between shell operators; redirections and their targets are left out."""
    segments: list[list[str]] = [[]]
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word and set(word) <= _PUNCTUATION:
            if word.startswith((">", "<")) or word in ("&>", "&>>"):
                skip_next = True
            else:
                segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def _name_of(segment: list[str]) -> str | None:
    if _base(segment[0]) == "command" and segment[1:2] and segment[1] in ("-v", "-V"):
        return None  # `command -v X > /dev/null && X ...` (sysstat): a check, the job is what follows
    words = _strip_wrappers(segment)
    if words and words[0].startswith("$") and "/" in words[0]:
        words[0] = _base(words[0])
    if not words or _base(words[0]) in _GUARDS or words[0].startswith(("$", "`", "#", ">", "<")):
        return None
    program = _base(words[0]).lower()
    rest = words[1:]
    if program in _INTERPRETERS or re.fullmatch(r"python\d(\.\d+)?|php\d(\.\d+)?|perl\d", program):
        if rest[:1] in (["-c"], ["-e"]) and len(rest) > 1:
            inner = _segments(_words(rest[1]))
            if inner and _base(inner[0][0]) == "sleep":
                return None  # certbot's `perl -e 'sleep int(rand(43200))' && certbot renew`: a random delay
            if rest[0] == "-c":
                return next((n for s in inner if (n := _name_of(s))), None)
            return slug(program) or None  # `perl -e CODE`: the code is no name
        if program in ("uv", "poetry", "pipenv") and rest[:1] == ["run"]:
            rest = rest[1:]
        script = next((w for w in rest if not w.startswith("-")), None)
        if script is None:
            return slug(program) or None
        program, rest = _base(script).lower(), rest[rest.index(script) + 1 :]
    name = _EXTENSIONS.sub("", program)
    if name in _SUBCOMMANDS or name.endswith("ctl"):
        action = next((w for w in rest if not w.startswith("-") and not _ASSIGNMENT.match(w)), None)
        if action:
            name = f"{name} {_EXTENSIONS.sub('', _base(action))}"
    if name in _PATH_TOOLS:
        target = next((w for w in rest if w.startswith(("/", "~"))), None)
        if target and _base(target):
            name = f"{name} {_base(target)}"
    if name in ("curl", "wget"):
        url = next((w for w in rest if re.match(r"https?://", w)), None)
        if url:
            name = f"{name} {re.sub(r'^https?://', '', url).split('/')[0]}"
    return slug(name) or None


def _strip_wrappers(segment: list[str]) -> list[str]:
    words = list(segment)
    while words and (words[0] in _KEYWORDS or _ASSIGNMENT.match(words[0])):
        words.pop(0)
    while words and _base(words[0]) in _WRAPPERS:
        wrapper = _base(words.pop(0))
        positionals = _WRAPPER_POSITIONALS.get(wrapper, 0)
        while words and (words[0].startswith("-") or _ASSIGNMENT.match(words[0])):
            option = words.pop(0)
            if option in _WRAPPER_VALUE_OPTIONS.get(wrapper, ()) and words:
                words.pop(0)
        for _ in range(positionals):
            if words:
                words.pop(0)
    return words


def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]
