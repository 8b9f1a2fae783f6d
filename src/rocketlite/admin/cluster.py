"""Cluster verbs: clusterList and brokerStatus, both built on GET_BROKER_RUNTIME_INFO (28).

clusterList turns each broker's runtime KV table into mqadmin's columns (version, in/out TPS with
the send/pull queue load, page-cache lock wait, hours of messages kept, disk use; `-m` adds the
yesterday/today message totals). A broker that does not answer is still listed, with its error,
so one dead slave does not hide the rest of the cluster.
"""

from __future__ import annotations

import time
from typing import Any

from rocketlite.admin.client import AdminClient, AdminError
from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.codes import RequestCode


async def runtime_info(admin: AdminClient, addr: str) -> dict[str, str]:
    response = await admin.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return dict(KVTable.from_json(response.body or b"{}").table)


def _num(table: dict[str, str], key: str) -> int:
    try:
        return int(table.get(key, "0"))
    except ValueError:
        return 0


def _first_rate(text: str | None) -> float:
    """The 10-second figure of a "%.4f %.4f %.4f" TPS string."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def broker_row(table: dict[str, str], now_ms: int) -> dict[str, Any]:
    """mqadmin clusterList's figures from one runtime table."""
    earliest = _num(table, "earliestMessageTimeStamp")
    ratio = table.get("commitLogDiskRatio")
    try:
        space = float(ratio) if ratio is not None else None
    except ValueError:
        space = None
    return {
        "version": table.get("brokerVersionDesc", ""),
        "inTps": _first_rate(table.get("putTps")),
        "outTps": _first_rate(table.get("getTransferedTps")),
        "sendQueueSize": _num(table, "sendThreadPoolQueueSize"),
        "pullQueueSize": _num(table, "pullThreadPoolQueueSize"),
        "pageCacheLockTimeMills": _num(table, "pageCacheLockTimeMills"),
        "hours": (now_ms - earliest) / 3_600_000 if earliest > 0 else 0.0,
        "commitLogDiskRatio": space,
        "inTotalYesterday": _num(table, "msgPutTotalTodayMorning")
        - _num(table, "msgPutTotalYesterdayMorning"),
        "outTotalYesterday": _num(table, "msgGetTotalTodayMorning")
        - _num(table, "msgGetTotalYesterdayMorning"),
        "inTotalToday": _num(table, "msgPutTotalTodayNow") - _num(table, "msgPutTotalTodayMorning"),
        "outTotalToday": _num(table, "msgGetTotalTodayNow") - _num(table, "msgGetTotalTodayMorning"),
    }


async def cluster_list(admin: AdminClient, *, cluster: str | None = None) -> dict[str, Any]:
    """GET_BROKER_CLUSTER_INFO (106), then each broker's runtime info (masters and slaves)."""
    info = await admin.cluster_info()
    if cluster is not None and cluster not in info.cluster_addr_table:
        raise AdminError(f"cluster {cluster!r} not found in the name server")
    members: list[tuple[str, str, int, str]] = []
    for cluster_name in sorted(info.cluster_addr_table):
        if cluster is not None and cluster_name != cluster:
            continue
        for broker_name in sorted(info.cluster_addr_table[cluster_name]):
            data = info.broker_addr_table.get(broker_name)
            if data is None:
                continue
            for broker_id, addr in sorted(data.broker_addrs.items()):
                members.append((cluster_name, broker_name, broker_id, addr))
    rows: list[dict[str, Any]] = []
    with admin.reporter.task("Brokers", len(members)) as advance:
        for cluster_name, broker_name, broker_id, addr in members:
            row: dict[str, Any] = {
                "cluster": cluster_name,
                "brokerName": broker_name,
                "brokerId": broker_id,
                "addr": addr,
            }
            try:
                row.update(broker_row(await runtime_info(admin, addr), int(time.time() * 1000)))
            except AdminError as exc:
                row["error"] = str(exc)
            rows.append(row)
            advance(1)
    if not members:
        where = f" in cluster {cluster}" if cluster is not None else ""
        note = f"no broker is registered{where} with the name server {admin.namesrv_addrs[0]}"
        return {"brokers": rows, "note": note}
    return {"brokers": rows}


async def _broker_addrs(admin: AdminClient, broker_addr: str | None, cluster: str | None, *,
                        masters_only: bool) -> list[str]:  # fmt: skip
    if broker_addr is not None:
        return [broker_addr]
    info = await admin.cluster_info()
    if cluster not in info.cluster_addr_table:
        raise AdminError(f"cluster {cluster!r} not found in the name server")
    return [
        addr
        for name in sorted(info.cluster_addr_table[str(cluster)])
        if name in info.broker_addr_table
        for bid, addr in sorted(info.broker_addr_table[name].broker_addrs.items())
        if not masters_only or int(bid) == 0
    ]


def _parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


async def get_broker_config(
    admin: AdminClient, *, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    """GET_BROKER_CONFIG (26) of one broker or of every broker of a cluster."""
    out: dict[str, dict[str, str]] = {}
    for addr in await _broker_addrs(admin, broker_addr, cluster, masters_only=False):
        response = await admin.call(addr, RequestCode.GET_BROKER_CONFIG)
        out[addr] = _parse_properties((response.body or b"").decode("utf-8", "replace"))
    return {"brokers": out}


async def update_broker_config(
    admin: AdminClient, *, broker_addr: str | None, cluster: str | None, key: str, value: str
) -> dict[str, Any]:
    """UPDATE_BROKER_CONFIG (25): `key=value` as properties text, applied at run time by the broker."""
    body = f"{key}={value}\n".encode()
    updated = []
    for addr in await _broker_addrs(admin, broker_addr, cluster, masters_only=False):
        await admin.call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        updated.append(addr)
    return {"key": key, "value": value, "updated": updated}


async def broker_status(
    admin: AdminClient, *, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    """GET_BROKER_RUNTIME_INFO (28) of one broker (`-b`), or of every broker of a cluster (`-c`,
    slaves included, as mqadmin does); keys sorted."""
    if broker_addr is not None:
        addrs = [broker_addr]
    else:
        info = await admin.cluster_info()
        if cluster not in info.cluster_addr_table:
            raise AdminError(f"cluster {cluster!r} not found in the name server")
        addrs = [
            addr
            for name in sorted(info.cluster_addr_table[str(cluster)])
            if name in info.broker_addr_table
            for _, addr in sorted(info.broker_addr_table[name].broker_addrs.items())
        ]
    out: dict[str, dict[str, str]] = {}
    with admin.reporter.task("Brokers", len(addrs)) as advance:
        for addr in addrs:
            table = await runtime_info(admin, addr)
            out[addr] = dict(sorted(table.items()))
            advance(1)
    return {"brokers": out}
