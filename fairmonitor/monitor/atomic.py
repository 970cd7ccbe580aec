"""One way to replace a file the monitor owns: private, atomic and durable."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, text: str | bytes) -> None:
    """Replace ``path`` by ``text`` (str or bytes): a private temporary file, fsynced, renamed.

    ``mkstemp`` gives a fresh name opened with O_EXCL (it never follows a planted symlink)
    and mode 0600, in the target's directory, so the rename is atomic and a reader sees the
    old file or the new one, never half of it. The temporary file is removed on any failure.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "state.json"
    >>> write_atomic(target, "{}")
    >>> target.read_text(), oct(target.stat().st_mode & 0o777)
    ('{}', '0o600')
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb" if binary else "w",
                       **({} if binary else {"encoding": "utf-8"})) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
