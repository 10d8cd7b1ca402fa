"""A database that answers but refuses this user: wrong credentials or missing privileges (issue 16).

Neither is an outage. Retrying every few seconds would only repeat "permission denied" in the log while
``/readyz`` said 200, so they become ``StoreAccessDenied``: ``serve`` stops at start-up with one line (exit 1),
and ``/readyz`` answers 503 while the refusal lasts. ``require_writes`` is the start-up probe: statements that
write nothing but need the privileges the loops use, checked by the server when it plans them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schedctl.errors import StoreAccessDenied

if TYPE_CHECKING:
    from schedctl.store import Store

# SQLSTATE / MySQL error numbers.
_PG_PRIVILEGE = {"42501"}  # insufficient_privilege
_PG_AUTH = {"28P01", "28000"}  # invalid_password, invalid_authorization_specification
_MYSQL_PRIVILEGE = {1044, 1142, 1143, 1227, 1370}  # db, table, column, super, routine access denied
_MYSQL_AUTH = {1045, 1698}  # access denied for user (using password: ...)
_AUTH_TEXT = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "authentication failed",
    "access denied for user",
)
_PRIVILEGE_TEXT = ("permission denied", "command denied", "attempt to write a readonly database")

# The writes the scheduler and the worker make, on no rows at all (every column: MySQL's strict mode checks
# defaults even when no row is inserted).
WRITE_PROBES = (
    "UPDATE scheduler_lease SET holder = holder WHERE 1 = 0",
    "INSERT INTO scheduler_lease SELECT * FROM scheduler_lease WHERE 1 = 0",
    "UPDATE lease_terms SET holder = holder WHERE 1 = 0",
    "INSERT INTO lease_terms SELECT * FROM lease_terms WHERE 1 = 0",
    "INSERT INTO job_runs SELECT * FROM job_runs WHERE 1 = 0",
    "UPDATE job_runs SET state = state WHERE 1 = 0",
    "DELETE FROM job_runs WHERE 1 = 0",
    "INSERT INTO job_state SELECT * FROM job_state WHERE 1 = 0",
    "UPDATE job_state SET updated_at = updated_at WHERE 1 = 0",
    "INSERT INTO job_events SELECT * FROM job_events WHERE 1 = 0",
)


def refusal(exc: Exception, target: str, first_line: str) -> StoreAccessDenied | None:
    """The driver error as StoreAccessDenied when the server refused this user; None otherwise."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlstate", None) or (getattr(orig, "args", None) or [None])[0]
    text = str(orig).lower()
    unknown_role = 'role "' in text and "does not exist" in text
    if code in _PG_AUTH or code in _MYSQL_AUTH or unknown_role or any(m in text for m in _AUTH_TEXT):
        return StoreAccessDenied(f"{target} refused the login: {first_line} (check the user and password)")
    if code in _PG_PRIVILEGE or code in _MYSQL_PRIVILEGE or any(m in text for m in _PRIVILEGE_TEXT):
        return StoreAccessDenied(
            f"{target} refused a statement: {first_line} (schedctl's user needs to read and write its tables)"
        )
    return None


def ping(store: Store) -> None:
    """One round trip (``SELECT 1``) in a read transaction: raises unless the database answers."""
    from sqlalchemy import text

    with store.read() as conn:
        conn.execute(text("SELECT 1"))


def require_writes(store: Store) -> None:
    """Raise StoreAccessDenied unless this user may write every table the loops write. Changes nothing."""
    from sqlalchemy import text

    with store.begin() as conn:
        for statement in WRITE_PROBES:
            conn.execute(text(statement))
        conn.rollback()
