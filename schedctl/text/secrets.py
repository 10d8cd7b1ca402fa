"""Masking secrets in text that may be printed or logged. No imports beyond ``re``: logging uses it."""

from __future__ import annotations

import re

MASK = "***"
# Names whose values are secrets: password, sslpassword, passwd, pwd, secret, token, api_key, auth, ...
SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|auth|cred", re.IGNORECASE)
_SECRET_IN_TEXT = re.compile(
    r"(?P<head>\b[\w.-]*(?:pass|pwd|secret|token|key|auth|cred)[\w.-]*=)(?P<value>[^\s&;'\"]+)",
    re.IGNORECASE,
)


def mask_query_secrets(text: str) -> str:
    """``...?password=hunter2&x=1`` -> ``...?password=***&x=1``, in a URL or in any text."""
    return _SECRET_IN_TEXT.sub(lambda m: m.group("head") + MASK, text)
