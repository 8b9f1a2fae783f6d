"""RocketMQ 4.x plain-ACL request signatures (`AclClientRPCHook` / `AclUtils`), sans IO.

A client with credentials (access key AK, secret key SK, optional security token ST) adds to the
ext fields of every request it sends:

* `AccessKey` = AK,
* `SecurityToken` = ST (only when it has one),
* `Signature` = Base64(HmacSHA1(key = SK as UTF-8, message = content)), standard Base64 with
  padding (`AclSigner.calSignature`).

The signed `content` (`AclUtils.combineRequestContent`), byte for byte:

1. take the request's ext fields **including** the `AccessKey` (and `SecurityToken`) just added,
   **excluding** `Signature` and `_UNIQUE_KEY_QUERY` (the latter is an extra ext entry of unique-key
   queries, not a header field: Java's client leaves it out, and the broker skips it), and
   skipping null values;
2. sort them by key in Java `String.compareTo` order (UTF-16 code units, so `A..Z` before `_`
   before `a..z`, and "B" < "a");
3. concatenate the **values only** (no keys, no separators) and encode the string as UTF-8;
4. append the body bytes as they are sent (nothing when there is no body).

The broker (`rocketlite.broker.acl`, `PlainAccessValidator`) recomputes the same content from the
ext fields it received (all but `Signature` and `_UNIQUE_KEY_QUERY`) with the account's secret and
compares. Name servers (4.x) do not check signatures, so signing every request is harmless.

Example: ext {"topic": "TopicTest"}, AK "rocketmq2", SK "12345678", no body: content is
b"rocketmq2TopicTest" and the signature "GeeGoP9mRvDhoVp4PD5omX0prgE=".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketlite.protocol.wire.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "UNSIGNED_KEYS",
    "SessionCredentials",
    "calc_signature",
    "sign",
    "signing_content",
]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
UNSIGNED_KEYS: tuple[str, ...] = (SIGNATURE, UNIQUE_KEY_QUERY)
"""Ext keys never part of the signed content (both sides leave them out)."""


def _java_key(key: str) -> bytes:
    # Java's String.compareTo orders by UTF-16 code units.
    return key.encode("utf-16-be")


def signing_content(ext: Mapping[str, str | None], body: bytes | None, *,
                    exclude: tuple[str, ...] = UNSIGNED_KEYS) -> bytes:  # fmt: skip
    """AclUtils.combineRequestContent: sorted ext values (keys left out) as UTF-8, then the body."""
    values = [
        v
        for k, v in sorted(ext.items(), key=lambda kv: _java_key(kv[0]))
        if k not in exclude and v is not None
    ]
    content = "".join(values).encode("utf-8")
    return content + body if body else content


def calc_signature(content: bytes, secret_key: str) -> str:
    """AclSigner: Base64(HmacSHA1(secretKey, content))."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(ext: Mapping[str, str], body: bytes | None, access_key: str, secret_key: str,
         security_token: str | None = None) -> dict[str, str]:  # fmt: skip
    """Client side (AclClientRPCHook): a copy of `ext` + AccessKey (+ SecurityToken) + Signature.

    Idempotent: signing an already signed ext again gives the same fields.
    """
    out = {k: v for k, v in ext.items() if k != SIGNATURE}
    out[ACCESS_KEY] = access_key
    if security_token is not None:
        out[SECURITY_TOKEN] = security_token
    out[SIGNATURE] = calc_signature(signing_content(out, body), secret_key)
    return out


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """Java's `SessionCredentials`: what a client signs its requests with (the secret is not in repr)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def sign_request(self, cmd: RemotingCommand) -> RemotingCommand:
        """Replace `cmd`'s ext fields with a signed copy (the caller's dict is not changed); returns cmd."""
        cmd.ext_fields = sign(cmd.ext_fields, cmd.body, self.access_key, self.secret_key, self.security_token)
        return cmd
