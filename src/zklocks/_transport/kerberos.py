"""Which Kerberos principal a GSSAPI login will use, asked of the system's libkrb5.

``acl="creator"`` and the lock directory's ACL check need the identity the server will
give the session (``sasl:alice@REALM``) before the first login, so it is worked out
here the way the GSSAPI library will pick it: the principal given (its realm added
when left out), else the credential cache's default principal (``kinit``,
``KRB5CCNAME``), else the first entry of the client keytab (``KRB5_CLIENT_KTNAME``).
ctypes on libkrb5 (present wherever a Kerberos binding is) rather than another
dependency; any failure means "not known" (``None``), never an exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from typing import Any

__all__ = ["principal_name"]


class _KeyBlock(ctypes.Structure):
    _fields_ = [
        ("magic", ctypes.c_int32),
        ("enctype", ctypes.c_int32),
        ("length", ctypes.c_uint),
        ("contents", ctypes.c_void_p),
    ]


class _KeytabEntry(ctypes.Structure):
    _fields_ = [
        ("magic", ctypes.c_int32),
        ("principal", ctypes.c_void_p),
        ("timestamp", ctypes.c_int32),
        ("vno", ctypes.c_uint32),
        ("key", _KeyBlock),
    ]


def _library() -> Any:
    name = ctypes.util.find_library("krb5") or "libkrb5.so.3"
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _unparse(lib: Any, context: ctypes.c_void_p, principal: ctypes.c_void_p) -> str | None:
    text = ctypes.c_char_p()
    if lib.krb5_unparse_name(context, principal, ctypes.byref(text)) != 0 or not text.value:
        return None
    value = bytes(text.value).decode("utf-8", "replace")
    lib.krb5_free_unparsed_name(context, text)
    return value


def _given(lib: Any, context: ctypes.c_void_p, name: str) -> str | None:
    principal = ctypes.c_void_p()
    if lib.krb5_parse_name(context, name.encode("utf-8"), ctypes.byref(principal)) != 0:
        return None
    try:
        return _unparse(lib, context, principal)
    finally:
        lib.krb5_free_principal(context, principal)


def _from_cache(lib: Any, context: ctypes.c_void_p) -> str | None:
    with contextlib.ExitStack() as frees:  # each handle made is freed, last first
        cache = ctypes.c_void_p()
        if lib.krb5_cc_default(context, ctypes.byref(cache)) != 0:
            return None
        frees.callback(lib.krb5_cc_close, context, cache)
        principal = ctypes.c_void_p()
        if lib.krb5_cc_get_principal(context, cache, ctypes.byref(principal)) != 0:
            return None
        frees.callback(lib.krb5_free_principal, context, principal)
        return _unparse(lib, context, principal)


def _from_client_keytab(lib: Any, context: ctypes.c_void_p) -> str | None:
    with contextlib.ExitStack() as frees:
        keytab = ctypes.c_void_p()
        if lib.krb5_kt_client_default(context, ctypes.byref(keytab)) != 0:
            return None
        frees.callback(lib.krb5_kt_close, context, keytab)
        cursor = ctypes.c_void_p()
        if lib.krb5_kt_start_seq_get(context, keytab, ctypes.byref(cursor)) != 0:
            return None
        frees.callback(lib.krb5_kt_end_seq_get, context, keytab, ctypes.byref(cursor))
        entry = _KeytabEntry()
        if lib.krb5_kt_next_entry(context, keytab, ctypes.byref(entry), ctypes.byref(cursor)):
            return None
        frees.callback(lib.krb5_free_keytab_entry_contents, context, ctypes.byref(entry))
        return _unparse(lib, context, ctypes.c_void_p(entry.principal))


def principal_name(given: str | None) -> str | None:
    """The full name (``alice@REALM``) of the principal a GSSAPI login will use, or None."""
    lib = _library()
    if lib is None:
        return None
    context = ctypes.c_void_p()
    if lib.krb5_init_context(ctypes.byref(context)) != 0:
        return None
    try:
        if given is not None:
            return _given(lib, context, given)
        return _from_cache(lib, context) or _from_client_keytab(lib, context)
    finally:
        lib.krb5_free_context(context)
