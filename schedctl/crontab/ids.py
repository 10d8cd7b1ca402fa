"""Job ids a sysadmin recognises, from a crontab line: ``backup-db``, ``cron-daily``, ``echo-hi``.

The first of these that gives a name is the id:

1. the short comment just above the line: ``# Nightly dump.`` -> ``nightly-dump``. One comment line of at most
   MAX_COMMENT_WORDS words, with a word about what runs (``# every night`` only says when) and no code; or the
   name Puppet or Ansible gave the job (``# Puppet Name: db backup``, ``#Ansible: db backup`` -> ``db-backup``);
2. the program the command runs, past checks, wrappers and interpreters: ``backup-db`` for
   ``test -x /usr/local/bin/backup-db.sh && nice /usr/local/bin/backup-db.sh``; a tool with its action
   (``docker-system``, ``certbot-renew``), a path tool with its path (``find-downloads``), ``run-parts`` with
   its folder (``cron-daily`` for ``run-parts /etc/cron.daily``);
3. when the command only runs bare utilities (``echo``, ``cat``, ``mail``, ``sh``...): the first one with the
   first meaningful words it is given (``echo-hi``, ``cat-motd``, ``echo-drop-caches`` for
   ``echo 3 > /proc/sys/vm/drop_caches``). A utility is the id on its own only when the command is nothing more.

The same crontab always gives the same ids (no counters, no hashes of line numbers), so importing it again, or
importing what ``schedctl export`` wrote, finds the jobs already there. Clashes get ``-2``, ``-3`` in file order.
Ids are slugs (``[a-z0-9-]``, at most MAX_LENGTH characters): valid job ids (``[a-z0-9][a-z0-9._-]*``).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    "exit",
    "return",
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


# Programs whose name alone says too little: the id adds the first meaningful words they are given.
_UTILITIES = {
    "echo",
    "printf",
    "cat",
    "tac",
    "tee",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "sed",
    "awk",
    "cut",
    "tr",
    "sort",
    "uniq",
    "wc",
    "ls",
    "date",
    "touch",
    "mkdir",
    "ln",
    "kill",
    "pkill",
    "killall",
    "logger",
    "wall",
    "write",
    "yes",
    "expr",
    "mail",
    "mailx",
    "s-nail",
    "bsd-mailx",
    "sendmail",
    "mutt",
    "df",
    "free",
    "false",
}
MAX_UTILITY_WORDS = 2
MAX_COMMENT_WORDS = 4
# Words that say when a job runs, or that it runs: a comment made only of them names no job ("# run every night").
_WHEN_WORDS = set(
    "every each daily nightly hourly weekly monthly yearly annually once twice times minute minutes hour hours "
    "day days week weeks month months year years night nights morning mornings evening evenings afternoon "
    "midnight noon am pm at on in of the a an and or to from until till after before by run runs running "
    "job jobs cron cronjob crontab entry entries task tasks schedule scheduled o clock weekday weekdays weekend "
    "weekends monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun".split()
)
# Words too small to name anything in a utility's arguments.
_STOP_WORDS = {"the", "a", "an", "of", "to", "and", "or", "for", "in", "on", "at", "is", "it", "by", "with"}
_CODE = re.compile(r"[/\\$=|;<>&`{}\[\]]")  # a comment with these is code or a path, not a name
# The name Puppet's and Ansible's cron resources write above each job line they manage: the job's name, as is.
_MANAGED = re.compile(r"(?:Puppet Name|Ansible):\s*(\S.*)\Z")
_PLACEHOLDER = "$_"  # what an expansion (`$(...)`, backticks) is replaced by: an argument, never a name


@dataclass(frozen=True)
class _Bare:
    """A bare utility: its name, and what the id may take from its arguments and redirection targets."""

    program: str
    args: list[str]
    targets: list[str]


@dataclass(frozen=True)
class _Segment:
    """One simple command: its words, and the files its redirections name (left out of the words)."""

    words: list[str]
    targets: list[str]


def derive_id(command: str, comment: str | None = None) -> str:
    """The id for a job line: its short ``comment`` (the description), else what ``command`` runs."""
    return _from_comment(comment) or _from_command(command)


def _from_comment(comment: str | None) -> str | None:
    if not comment:
        return None
    managed = _MANAGED.match(comment.splitlines()[-1].strip())
    if managed:
        return slug(managed.group(1)) or None
    if "\n" in comment or _CODE.search(comment):
        return None  # several lines explain rather than name; code or a path names nothing
    text = re.sub(r"\([^)]*\)", " ", comment).strip().rstrip(".:;!?,")
    words = text.split()
    if not words or len(words) > MAX_COMMENT_WORDS:
        return None
    parts = slug(text).split("-")
    if not any(p not in _WHEN_WORDS and not p.isdigit() for p in parts if p):
        return None
    return "-".join(p for p in parts if p not in _STOP_WORDS) or None


def _from_command(command: str) -> str:
    words = _words(re.sub(r"\$\(\([^()]*\)\)|\$\([^()]*\)|`[^`]*`", _PLACEHOLDER, command))
    # Paths inside expansions are a last resort for a bare utility: `kill -HUP $(cat /run/nginx.pid)`.
    return _from_words(words, _words(command)) or slug(command) or "job"


def _from_words(words: list[str], raw: Sequence[str] = ()) -> str | None:
    """The first program that names itself; else the first bare utility, with words; else the first check."""
    segments = _segments(words)
    bare: tuple[_Bare, int] | None = None
    for index, segment in enumerate(segments):
        found = _name_of(segment.words, segment.targets)
        if isinstance(found, str):
            return found
        if found is not None and bare is None:
            bare = (found, index)
    if bare is None:
        for index, segment in enumerate(segments):
            guard = _guard_of(segment)
            if guard is not None:
                bare = (guard, index)
                break
    if bare is None:
        return None
    utility, index = bare
    later = [w for s in segments[index + 1 :] for w in s.words[1:]]
    found_words = (
        _meaningful(utility.args)
        or _meaningful(utility.targets, paths_only=True)
        or _meaningful(later)
        or _meaningful(list(raw), paths_only=True)
    )
    return slug(" ".join([utility.program, *found_words[:MAX_UTILITY_WORDS]])) or None


def slug(text: str) -> str:
    """Lower-case letters and digits joined by single dashes, at most MAX_LENGTH, cut at a dash."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()  # é -> e, not a cut
    out = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
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


def _segments(words: list[str]) -> list[_Segment]:
    """Simple commands between shell operators; redirections' targets are set apart from the words."""
    segments = [_Segment([], [])]
    target_next = False
    for word in words:
        if target_next:
            target_next = False
            segments[-1].targets.append(word)
        elif word and set(word) <= _PUNCTUATION:
            if word.startswith((">", "<")) or word in ("&>", "&>>"):
                target_next = True
                if segments[-1].words and segments[-1].words[-1].isdigit():
                    segments[-1].words.pop()  # the 2 of `2>&1`, a file descriptor
            else:
                segments.append(_Segment([], []))
        else:
            segments[-1].words.append(word)
    return [s for s in segments if s.words]


def _name_of(segment: list[str], targets: list[str]) -> str | _Bare | None:
    """The id a simple command gives (a str), a bare utility that needs words (_Bare), or None (a check)."""
    if _base(segment[0]) == "command" and segment[1:2] and segment[1] in ("-v", "-V"):
        return None  # `command -v X > /dev/null && X ...` (sysstat): a check, the job is what follows
    words = _strip_wrappers(segment)
    if not words and _base(segment[0]) in _WRAPPERS:
        return _Bare(_base(segment[0]), segment[1:], targets)  # `flock -n /tmp/lock` and nothing to run
    if words and words[0].startswith("$") and "/" in words[0]:
        words[0] = _base(words[0])
    if not words or _base(words[0]) in _GUARDS or words[0].startswith(("$", "`", "#", ">", "<")):
        return None
    program = _base(words[0]).lower()
    rest = words[1:]
    if program == "run-parts":
        # The folder names the job: /etc/cron.daily -> cron-daily.
        folder = next((w for w in rest if w.startswith("/") and _base(w)), None)
        return (slug(_base(folder)) if folder else "") or "run-parts"
    if program in _INTERPRETERS or re.fullmatch(r"python\d(\.\d+)?|php\d(\.\d+)?|perl\d", program):
        if rest[:1] in (["-c"], ["-e"]) and len(rest) > 1:
            inner = _segments(_words(rest[1]))
            if inner and _base(inner[0].words[0]) == "sleep":
                return None  # certbot's `perl -e 'sleep int(rand(43200))' && certbot renew`: a random delay
            if rest[0] == "-c":
                return _from_words(_words(rest[1]))
            return _Bare(program, re.findall(r"[A-Za-z_][A-Za-z0-9_]*", rest[1]), targets)  # `perl -e CODE`
        if program in ("uv", "poetry", "pipenv") and rest[:1] == ["run"]:
            rest = rest[1:]
        script = next((w for w in rest if not w.startswith("-")), None)
        if script is None:
            return _Bare(program, [], targets)
        program, rest = _base(script).lower(), rest[rest.index(script) + 1 :]
    name = _EXTENSIONS.sub("", program)
    if name in _UTILITIES:
        return _Bare(name, rest, targets)
    if name in _SUBCOMMANDS or name.endswith("ctl"):
        action = next((w for w in rest if not w.startswith("-") and not _ASSIGNMENT.match(w)), None)
        if action:
            name = f"{name} {_EXTENSIONS.sub('', _base(action))}"
    if name in _PATH_TOOLS:
        target = next((w for w in rest if w.startswith(("/", "~"))), None)
        if not (target and _base(target)):
            return _Bare(name, rest, targets)
        name = f"{name} {_base(target)}"
    if name in ("curl", "wget"):
        url = next((w for w in rest if re.match(r"https?://", w)), None)
        if url:
            name = f"{name} {re.sub(r'^https?://', '', url).split('/')[0]}"
    return slug(name) or None


def _guard_of(segment: _Segment) -> _Bare | None:
    """A check as a last resort, for a command that is nothing else (`test -e /run/flag`)."""
    words = _strip_wrappers(segment.words)
    if not words or _base(words[0]) not in _GUARDS:
        return None
    program = "test" if words[0] in ("[", "[[") else _base(words[0])
    return _Bare(program, [w for w in words[1:] if w not in ("]", "]]")], segment.targets)


def _meaningful(args: list[str], paths_only: bool = False) -> list[str]:
    """The words in a utility's arguments that say what it works on: `cat /etc/motd` -> motd."""
    out: list[str] = []
    for arg in args:
        if arg.startswith(("-", "$", "`")) or _ASSIGNMENT.match(arg) or "@" in arg or arg == "/dev/null":
            continue
        if re.match(r"https?://", arg):
            arg = re.sub(r"^https?://", "", arg).split("/")[0]
        elif "/" in arg:
            arg = _base(arg).lstrip(".").split(".")[0]  # /etc/munin/munin.conf -> munin
        elif paths_only:
            continue
        for word in map(slug, arg.split()):  # "On-call handover" -> on-call, handover
            if re.search("[a-z]", word) and word not in _STOP_WORDS:
                out.append(word)
    return out


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
