"""Files that hold secrets or what the owner did (DESIGN.md §9 "Secrets on disk and in the
browser", the audit log): afterwards each is a regular file of mode 0600 owned by this process's
user, whatever was at its path before.

- `write_private(path, text)`: a file that receives a token (the runtime file,
  `--owner-token-file`). Written as a new file beside `path` — `O_CREAT | O_EXCL | O_NOFOLLOW`,
  mode 0600, a random name, so nothing that was there (a symlink, a file another user planted)
  is opened — filled, fsynced and renamed over `path`. `rename` replaces a symlink at `path`
  rather than following it, and a reader still holding the old file (0644, say) holds the old
  inode, which never saw the token.
- `open_private_append(path)`: the audit log, appended to across runs. Opened with
  `O_NOFOLLOW` (a symlink at `path` is refused by the kernel) and checked on the open
  descriptor (no race between check and use): a regular file, ours, that neither group nor
  others may read or write — else refused with one line that says how to fix it. A new file is
  created 0600.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO

from pcor_sql.errors import UserError

PRIVATE = 0o600


def write_private(path: Path | str, text: str, *, what: str = "file") -> Path:
    """Write `text` to `path` as a new regular 0600 file renamed over whatever was there
    (see the module docstring). A UserError names `what` and the problem (a folder at `path`,
    a folder that does not exist or is not writable)."""
    target = Path(path).expanduser()
    if target.is_dir() and not target.is_symlink():
        raise UserError(f"cannot write the {what} {str(target)!r}: it is a folder", "give a file path")
    folder = target.parent
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(16):
        temporary = folder / f".{target.name}.{secrets.token_hex(8)}.tmp"
        try:
            descriptor = os.open(temporary, flags, PRIVATE)
            break
        except FileExistsError:
            continue  # a name someone holds (or planted): another random one
        except OSError as exc:
            raise _refusal(what, target, exc) from None
    else:  # pragma: no cover - 16 collisions of 64 random bits
        raise UserError(f"cannot write the {what} {str(target)!r}: no free temporary name", "retry")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), PRIVATE)  # exactly 0600, whatever the umask
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _refusal(what, target, exc) from None
    _sync_folder(folder)
    return target


def open_private_append(path: Path | str, *, what: str = "audit log") -> IO[str]:
    """`path` opened for appending text, a regular 0600 file of ours (created so if missing);
    a symlink, another user's file, or one that group or others may read or write is refused."""
    target = Path(path).expanduser()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(target, flags, PRIVATE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"the {what} {str(target)!r} is a symbolic link",
                            "name the file itself (a link is never followed to a file that holds secrets)") from None
        raise _refusal(what, target, exc) from None
    try:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            raise UserError(f"the {what} {str(target)!r} is not a regular file", "name a file (or a new path)")
        if found.st_uid != os.geteuid():
            raise UserError(f"the {what} {str(target)!r} belongs to another user",
                            "name a file of your own (or a new path)")
        if stat.S_IMODE(found.st_mode) & 0o077:
            raise UserError(f"the {what} {str(target)!r} can be read or written by others"
                            f" (mode {stat.S_IMODE(found.st_mode):04o})",
                            f"chmod 600 {target} (or name a new file: it is made 0600)")
        os.fchmod(descriptor, PRIVATE)  # a new file: exactly 0600, whatever the umask
        return os.fdopen(descriptor, "a", encoding="utf-8")
    except BaseException:
        os.close(descriptor)
        raise


def _refusal(what: str, target: Path, exc: OSError) -> UserError:
    if exc.errno == errno.ENOENT:
        return UserError(f"cannot write the {what} {str(target)!r}: its folder does not exist",
                         "create the folder first, or give another path")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return UserError(f"cannot write the {what} {str(target)!r}: {exc.strerror}",
                         "give a path in a folder you may write to")
    if exc.errno == errno.EISDIR:
        return UserError(f"cannot write the {what} {str(target)!r}: it is a folder", "give a file path")
    return UserError(f"cannot write the {what} {str(target)!r}: {exc.strerror or exc}", "check the path")


def _sync_folder(folder: Path) -> None:
    """fsync the folder, so the rename itself survives a crash (best effort: not every file system
    lets a folder be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
