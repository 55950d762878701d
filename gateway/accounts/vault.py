"""The key that encrypts account tokens in the store, kept outside the database.

`ANYY_SECRET_KEY` (32 random bytes, URL-safe base64: what `cryptography`'s `Fernet.generate_key()` makes)
when set; else `<data dir>/secret.key`, created on first use by the first sign-in. Residents on several
machines sharing a PostgreSQL store need the same key (docs/scale.md): each sets `ANYY_SECRET_KEY`.

The key file is born with mode 0600 (created with O_EXCL under a temporary name, then linked into place,
so no reader ever sees it partly written or readable by others, and two processes creating it at once end
up with one key), and a key file that others can read is refused, as ssh refuses such a private key.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

KEY_ENV = "ANYY_SECRET_KEY"
KEY_FILE = "secret.key"


class VaultError(Exception):
    """The key is missing, malformed, unreadable, or not the one the tokens were stored with. The text is
    one line for a person, and never holds a key or a token."""


class Vault:
    """Encrypts and decrypts token strings. The key is read (or created) at first use, on the store's
    side of the event loop's work (callers run this in a thread or on the store thread)."""

    def __init__(self, data_dir: Path, env: str | None = None) -> None:
        self.path = data_dir / KEY_FILE
        self._env = env if env is not None else os.environ.get(KEY_ENV, "").strip()
        self._fernet: Fernet | None = None

    @property
    def source(self) -> str:
        """Where the key comes from, for messages (never the key)."""
        return f"${KEY_ENV}" if self._env else str(self.path)

    def encrypt(self, text: str) -> str:
        return self._key(create=True).encrypt(text.encode()).decode()

    def decrypt(self, token: str) -> str:
        from cryptography.fernet import InvalidToken

        try:
            return self._key(create=False).decrypt(token.encode()).decode()
        except InvalidToken:
            raise VaultError(f"the account tokens in the store were encrypted with another key than {self.source}"
                             " (was the key changed or lost?): restore that key, or sign in again") from None

    def _key(self, *, create: bool) -> Fernet:
        if self._fernet is None:
            self._fernet = self._load(create)
        return self._fernet

    def _load(self, create: bool) -> Fernet:
        from cryptography.fernet import Fernet

        if self._env:
            try:
                return Fernet(self._env)
            except ValueError:
                raise VaultError(f"${KEY_ENV} is not a key: it must be 32 random bytes in URL-safe base64, e.g. from"
                                 " python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())'"
                                 ) from None
        key = self._read_file()
        if key is None:
            if not create:
                raise VaultError(f"there is no key file {self.path} (and ${KEY_ENV} is not set) for the account"
                                 " tokens in the store: restore it, or sign in again")
            key = self._create_file()
        try:
            return Fernet(key)
        except ValueError:
            raise VaultError(f"{self.path} does not hold a key (32 random bytes in URL-safe base64)") from None

    def _read_file(self) -> bytes | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise VaultError(f"cannot read the key file {self.path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise VaultError(f"the key file {self.path} is open to other users (mode {stat.S_IMODE(mode):04o}):"
                                 f" run chmod 600 {self.path}")
            return f.read().strip()

    def _create_file(self) -> bytes:
        from cryptography.fernet import Fernet

        key = Fernet.generate_key()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{KEY_FILE}.{secrets.token_hex(8)}")
        # O_EXCL + 0600: the file exists only with the owner's permissions (the umask can only remove
        # bits); linked into place when complete, it never shows partly written.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(key + b"\n")
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, self.path)
            except FileExistsError:  # another process created it first: use theirs
                existing = self._read_file()
                if existing is None:
                    raise VaultError(f"the key file {self.path} vanished while it was being created") from None
                return existing
        finally:
            tmp.unlink(missing_ok=True)
        return key
