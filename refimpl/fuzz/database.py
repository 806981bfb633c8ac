"""The example database a campaign uses: a folder, or a Redis server shared by machines."""

from __future__ import annotations

import functools
from pathlib import Path

from hypothesis.database import DirectoryBasedExampleDatabase

from refimpl.fuzz.outdir import check_writable_folder


class DatabaseError(ValueError):
    """The --database cannot be used (missing client package, server unreachable, bad path)."""


def _redis_client(spec: str):
    try:
        import redis
    except ImportError as exc:
        raise DatabaseError(f"{spec} needs the 'redis' package: pip install 'refimpl[redis]'"
                            ) from exc
    return redis.Redis.from_url(spec, socket_connect_timeout=5)


@functools.cache
def make_database(spec: str):
    """An example database from a directory path or a ``redis://`` URL: one object per spec
    and process (HypoFuzz fuzzes a test only when its database *is* the default one, and two
    Redis databases on one server compare unequal)."""
    if spec.startswith(("redis://", "rediss://")):
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(_redis_client(spec))

    return DirectoryBasedExampleDatabase(spec)


def check_database(spec: str) -> None:
    """Raise :class:`DatabaseError` unless ``spec`` can be used now (before any property runs):
    a Redis server answers PING; a folder exists or can be created, and can be written."""
    if spec.startswith(("redis://", "rediss://")):
        client = _redis_client(spec)
        try:
            client.ping()
        except Exception as exc:  # ConnectionError, TimeoutError, AuthenticationError, ...
            raise DatabaseError(f"cannot reach {spec}: {type(exc).__name__}: {exc}") from exc
        finally:
            client.close()
        return
    if "://" in spec:
        raise DatabaseError(f"{spec!r}: expected a folder or redis://host:port/db")

    try:
        check_writable_folder(Path(spec))
    except OSError as exc:
        raise DatabaseError(str(exc)) from exc
