"""Django's SECRET_KEY: from ``PMEM_SECRET_KEY``, else generated once per data directory.

A constant development key in the source would sign every installation's sessions and CSRF
tokens with the same, public, key. Instead a key is generated the first time a data directory
is used and kept there (``secret_key``, mode 0600), so each installation has its own and it
survives restarts. Under ``PMEM_HTTPS=1`` (a deployment) the key must be given: a key
readable by whoever can read the data directory is not a production secret.

The generated key is lazy: importing the settings touches nothing on disk (they start no
service and make no folder); the file is read, or made, the first time something signs."""

from __future__ import annotations

import os
import secrets
from functools import cache
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import lazy

FILE_NAME = "secret_key"


def secret_key(*, configured: str, data_dir: Path, https: bool) -> str:
    if configured:
        return configured
    if https:
        raise ImproperlyConfigured(
            "PMEM_HTTPS=1 needs PMEM_SECRET_KEY: set it to a long random string (for example "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`) kept out of the "
            "data directory")
    key: str = lazy(development_secret_key, str)(data_dir)
    return key


@cache  # once per process: the key never changes under it
def development_secret_key(data_dir: Path) -> str:
    """The data directory's key, created on first use. Processes starting at once agree on
    one: each writes its candidate to a private file and hard-links it into place, which
    only the first link does."""
    path = data_dir / FILE_NAME
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        candidate = data_dir / f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
        try:
            os.link(candidate, path)
        except FileExistsError:
            pass  # another process was first: its key it is
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(candidate, path)
        finally:
            candidate.unlink(missing_ok=True)
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it to have a new key made")
    return key
