"""Credentials never leave the process: URLs are masked wherever the monitor prints or stores them.

>>> mask_url("postgresql+psycopg2://monitor:s3cret@db.example.org:5432/preds")
'postgresql+psycopg2://monitor:***@db.example.org:5432/preds'
>>> mask_url("https://token@mlflow.example.org/api?password=x&b=1")
'https://***@mlflow.example.org/api?password=***&b=1'
>>> mask_url("sqlite:///predictions.db"), mask_url(None)
('sqlite:///predictions.db', None)
"""

from __future__ import annotations

import re

__all__ = ["mask_url", "mask_urls_in"]

# user:password@ or token@ right after the scheme; secrets in query parameters
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*)"
                       r"(?::(?P<password>[^@/\s]*))?@")
_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|passwd|pwd|token|secret|api_key|apikey|"
                           r"access_token)=)[^&#\s]*")


def _userinfo(m: re.Match[str]) -> str:
    if m["password"] is not None:
        return f"{m['scheme']}{m['user']}:***@"
    # a lone userinfo is usually a token (https://<token>@host); a bare user name would be
    # harmless, but the two cannot be told apart
    return f"{m['scheme']}***@" if m["user"] else m[0]


def mask_url(url: str | None) -> str | None:
    """``url`` with its password (or token) and secret query parameters replaced by ``***``."""
    if url is None:
        return None
    return _QUERY_SECRET.sub(r"\1***", _USERINFO.sub(_userinfo, str(url)))


def mask_urls_in(text: str) -> str:
    """Every URL inside free text (an exception message, a log line) masked.

    >>> mask_urls_in("cannot connect to http://u:p@h:5000 (refused)")
    'cannot connect to http://u:***@h:5000 (refused)'
    """
    return mask_url(text) or ""
