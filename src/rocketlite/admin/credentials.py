"""The ACL keys `rocketlite admin` signs its requests with (mqadmin's `AclUtils.getAclRPCHook`).

In order:

1. `--access-key AK --secret-key SK` on the command line (both, or neither);
2. else `accessKey` / `secretKey` from `$ROCKETMQ_HOME/conf/tools.yml`, as mqadmin reads them:
   no `ROCKETMQ_HOME`, no file, an empty file or a blank key means no keys (mqadmin then runs
   without ACL too); a file that cannot be read or is not YAML is an error here (mqadmin only
   logs it, and the broker's NO_PERMISSION that follows hides the cause);
3. else no keys: requests go unsigned, and a broker with `aclEnable=true` refuses them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocketlite.admin.client import AdminError, UsageError
from rocketlite.protocol.wire.acl_signature import SessionCredentials

TOOLS_YML = Path("conf") / "tools.yml"


def tools_yml_path(env: Mapping[str, str] | None = None) -> Path | None:
    """`$ROCKETMQ_HOME/conf/tools.yml`, or None without ROCKETMQ_HOME."""
    home = (os.environ if env is None else env).get("ROCKETMQ_HOME")
    return Path(home) / TOOLS_YML if home else None


def load_tools_yml(path: Path) -> SessionCredentials | None:
    """The keys in a tools.yml; None when the file is missing or does not name both keys."""
    import yaml  # noqa: PLC0415 - keeps --help fast

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AdminError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AdminError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        return None
    access_key, secret_key = (_text(data.get(k)) for k in ("accessKey", "secretKey"))
    if not access_key or not secret_key:
        return None
    return SessionCredentials(access_key, secret_key)


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def resolve_credentials(
    access_key: str | None, secret_key: str | None, *, env: Mapping[str, str] | None = None
) -> SessionCredentials | None:
    """The flags' keys, else tools.yml's, else None (see the module docstring)."""
    if access_key is not None or secret_key is not None:
        if not access_key or not secret_key:
            raise UsageError("--access-key and --secret-key must be given together")
        return SessionCredentials(access_key, secret_key)
    path = tools_yml_path(env)
    return None if path is None else load_tools_yml(path)
