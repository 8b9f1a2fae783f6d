"""Where ACL 2.0's users and ACLs live: one JSON file in the broker's config directory,
`<storePathRootDir>/config/auth.json`, replaced atomically on every change (temp file, fsync,
rename, fsync of the directory; the previous version is kept as `auth.json.bak`).

RocketMQ 5.3 keeps them in two RocksDB stores, `config/users` and `config/acls`, keyed by user
name and by subject. One file instead of two means a user's deletion takes its ACL with it in
one write. The layout holds the same values as the admin requests' bodies::

    {
      "users": [{"password": "...", "userStatus": "enable", "userType": "Super", "username": "admin"}],
      "acls": [{"policies": [{"entries": [...], "policyType": "Custom"}], "subject": "User:alice"}]
    }

A file that cannot be read or parsed stops the broker's start (`ConfigError` naming it), rather
than starting with no users, which would lock every client out, or with users missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from rocketlite.atomic_file import write_atomically
from rocketlite.protocol.bodies.auth import AclInfo, UserInfo
from rocketlite.protocol.errors import ConfigError, ProtocolError

FILE_NAME = "auth.json"


class AuthStore:
    """Reads and writes `auth.json`; knows nothing of what the entries mean."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / FILE_NAME

    def load(self) -> tuple[list[UserInfo], list[AclInfo]]:
        if not self.path.exists():
            return [], []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            users = [UserInfo.from_json_obj(u) for u in data.get("users") or []]
            acls = [AclInfo.from_json_obj(a) for a in data.get("acls") or []]
        except (OSError, ValueError, TypeError, AttributeError, ProtocolError) as exc:
            raise ConfigError(f"cannot read the ACL 2.0 users and ACLs in {self.path}: {exc}") from exc
        return users, acls

    def save(self, users: list[UserInfo], acls: list[AclInfo]) -> None:
        data = {
            "users": [u.to_json_obj() for u in users],
            "acls": [a.to_json_obj() for a in acls],
        }
        write_atomically(self.path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
