"""``RedisFence``: fenced writes to Redis keys, each decided by one Lua script.

Every fenced key is one Redis hash, ``<prefix><key>``, with two fields: ``token`` (the
highest token accepted for the key, in decimal) and ``value``. ``set`` and ``delete``
run one script that compares the caller's token with ``token`` and then writes, so no
other command runs between the comparison and the write (Redis runs a script whole):
concurrent writers to one key serialize, and the highest token's write is the last one
that can land. ``delete`` removes the value but keeps the bar, or a stale holder could
write again after it.

Tokens are compared as numbers, never as text, and without Lua's numbers, which are
doubles: exact only up to 2**53, while a zxid is a 64-bit number (its high half is the
leader's epoch). Both tokens are canonical decimals (no sign, no leading zero), so the
script compares lengths first (more digits, larger number) and then, at equal length,
the digits from the left: an exact comparison of the two integers.

Every key the fence touches is under ``prefix``; a Redis Cluster works (one key per
script). redis-py is the caller's (``zklocks[redis]``): nothing here imports it at run
time, the fence only calls the client it is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zklocks._errors import InvalidArgument
from zklocks.fencing._errors import StaleToken, checked_name, checked_token

if TYPE_CHECKING:  # redis-py is an optional extra; only type checking needs it here
    import redis
    import redis.asyncio

# KEYS[1]: the key's hash. ARGV[1]: the caller's token (canonical decimal); ARGV[2]:
# "set" or "delete"; ARGV[3]: the value to set. Reply: {1, token} accepted, or
# {0, highest} refused.
_SCRIPT = """
local highest = redis.call('HGET', KEYS[1], 'token')
local token = ARGV[1]
if highest and (#highest > #token or (#highest == #token and highest > token)) then
  return {0, highest}
end
if ARGV[2] == 'set' then
  redis.call('HSET', KEYS[1], 'token', token, 'value', ARGV[3])
else
  redis.call('HDEL', KEYS[1], 'value')
  redis.call('HSET', KEYS[1], 'token', token)
end
return {1, token}
"""

Value = bytes | bytearray | memoryview | str


class _Fence:
    """What both shells share: the key names, the arguments, the reply's meaning."""

    def __init__(self, prefix: str) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise InvalidArgument(f"prefix must be a non-empty str, not {prefix!r}")
        self.prefix = prefix

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefix={self.prefix!r})"

    def _key(self, key: object) -> str:
        return self.prefix + checked_name("key", key)

    @staticmethod
    def _set_args(value: object, token: object) -> list[Any]:
        if not isinstance(value, bytes | bytearray | memoryview | str):
            raise InvalidArgument(f"value must be bytes or str, not {type(value).__name__}")
        return [
            str(checked_token(token)),
            "set",
            bytes(value) if isinstance(value, memoryview) else value,
        ]

    @staticmethod
    def _delete_args(token: object) -> list[Any]:
        return [str(checked_token(token)), "delete", b""]

    @staticmethod
    def _outcome(key: str, token: int, reply: Any) -> None:
        if int(reply[0]) != 1:
            raise StaleToken(key, token, int(reply[1]))

    @staticmethod
    def _value(stored: Any) -> bytes | None:
        # a client made with decode_responses=True answers str
        return stored.encode() if isinstance(stored, str) else stored


class RedisFence(_Fence):
    """Fenced writes to Redis through a redis-py client (``zklocks[redis]``).

    ``RedisFence(client, prefix="zklocks:fence:")``: ``set``, ``delete`` and ``get`` a
    key's value; each key has its own bar. See docs/fencing.md.
    """

    def __init__(self, client: redis.Redis, prefix: str = "zklocks:fence:") -> None:
        super().__init__(prefix)
        self._client = client
        self._script = client.register_script(_SCRIPT)  # EVALSHA, loaded on first use

    def set(self, key: str, value: Value, token: int) -> None:
        """Store ``value`` under ``key`` unless a higher token was accepted for ``key``
        (``StaleToken``, nothing written); an equal token may write again."""
        args = self._set_args(value, token)
        self._outcome(key, token, self._script(keys=[self._key(key)], args=args))

    def delete(self, key: str, token: int) -> None:
        """Remove ``key``'s value unless a higher token was accepted (``StaleToken``);
        the bar stays, now at least ``token``."""
        args = self._delete_args(token)
        self._outcome(key, token, self._script(keys=[self._key(key)], args=args))

    def get(self, key: str) -> bytes | None:
        """``key``'s value, or None if it has none."""
        return self._value(self._client.hget(self._key(key), "value"))


class AsyncRedisFence(_Fence):
    """``RedisFence`` for ``redis.asyncio`` clients: the same methods, awaited."""

    def __init__(self, client: redis.asyncio.Redis, prefix: str = "zklocks:fence:") -> None:
        super().__init__(prefix)
        self._client = client
        self._script = client.register_script(_SCRIPT)

    async def set(self, key: str, value: Value, token: int) -> None:
        """See ``RedisFence.set``."""
        args = self._set_args(value, token)
        self._outcome(key, token, await self._script(keys=[self._key(key)], args=args))

    async def delete(self, key: str, token: int) -> None:
        """See ``RedisFence.delete``."""
        args = self._delete_args(token)
        self._outcome(key, token, await self._script(keys=[self._key(key)], args=args))

    async def get(self, key: str) -> bytes | None:
        """See ``RedisFence.get``."""
        return self._value(await self._client.hget(self._key(key), "value"))
