"""Human-readable output of each admin verb, drawn from the same data `--json` prints.

One function per verb, `(out, data, args) -> None`. Keeping them apart from the operations means
the JSON is the single source of truth: a table never shows a figure the JSON lacks. Column names
follow mqadmin's, without its `#` prefixes; times are local, as mqadmin prints them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rocketlite.admin.output import Output

PERM_NAMES = {4: "R", 2: "W", 1: "X"}
BODY_PREVIEW = 60


def time_text(ms: int | None) -> str:
    """`yyyy-MM-dd HH:mm:ss,SSS` (UtilAll.timeMillisToHumanString2); "-" for none."""
    if not ms or ms <= 0:
        return "-"
    try:
        stamp = datetime.fromtimestamp(ms / 1000)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return stamp.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def perm_text(perm: int) -> str:
    return f"{perm} " + "".join(name if perm & bit else "-" for bit, name in PERM_NAMES.items())


def preview(text: str | None, limit: int = BODY_PREVIEW) -> str:
    if text is None:
        return ""
    flat = text.replace("\r", "\\r").replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# -- topics ----------------------------------------------------------------------------------------


def update_topic(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for broker in data["brokers"]:
        out.line(f"create topic to {broker['brokerAddr']} success.")
    if data.get("orderConf"):
        out.line(f"set order conf of the topic: {data['orderConf']}")
    if not data.get("routeReady"):
        out.line("note: the name server does not show the new queue counts yet")
    out.pairs(sorted(data["topicConfig"].items()), title="TopicConfig")


def delete_topic(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    out.line(f"delete topic [{data['topic']}] from cluster [{data['cluster']}] success.")
    for addr in data["nameServers"]:
        out.line(f"delete topic [{data['topic']}] from NameServer {addr} success.")


def topic_list(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    if not args.cluster_model:
        out.table(("Topic",), ([t] for t in data["topics"]))
        return
    rows = [
        [row["cluster"], row["topic"], group]
        for row in data["topics"]
        for group in (row["consumerGroups"] or [""])
    ]
    out.table(("Cluster Name", "Topic", "Consumer Group"), rows)


def topic_route(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    brokers = [
        [b["cluster"], b["brokerName"], bid, addr]
        for b in data["brokerDatas"]
        for bid, addr in b["brokerAddrs"].items()
    ]
    out.table(
        ("Cluster", "Broker Name", "Broker ID", "Address"), brokers, title="Brokers", numeric=("Broker ID",)
    )
    queues = [
        [q["brokerName"], q["readQueueNums"], q["writeQueueNums"], perm_text(q["perm"]), q["topicSysFlag"]]
        for q in data["queueDatas"]
    ]
    out.table(
        ("Broker Name", "Read Queues", "Write Queues", "Perm", "Sys Flag"),
        queues,
        title="Queues",
        numeric=("Read Queues", "Write Queues", "Sys Flag"),
    )
    if data.get("orderTopicConf"):
        out.line(f"orderTopicConf: {data['orderTopicConf']}")


def topic_status(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    rows = [
        [q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"], time_text(q["lastUpdateTimestamp"])]
        for q in data["queues"]
    ]
    out.table(
        ("Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"),
        rows,
        numeric=("QID", "Min Offset", "Max Offset"),
    )


# -- groups ----------------------------------------------------------------------------------------


def update_sub_group(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for broker in data["brokers"]:
        out.line(f"create subscription group to {broker['brokerAddr']} success.")
    out.pairs(sorted(data["subscriptionGroupConfig"].items()), title="SubscriptionGroupConfig")


def delete_sub_group(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for broker in data["brokers"]:
        out.line(f"delete subscription group [{data['group']}] from broker [{broker['brokerAddr']}] success.")
    for topic in data["deletedTopics"]:
        out.line(f"delete topic [{topic}] from the cluster success.")


def consumer_progress(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    if "groups" in data:
        rows = [
            [g["group"], g["count"], g["version"], g["consumeType"], g["messageModel"], g["consumeTps"],
             g["diffTotal"]]
            for g in data["groups"]
        ]  # fmt: skip
        out.table(
            ("Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total"),
            rows,
            numeric=("Count", "TPS", "Diff Total"),
        )
        return
    if "note" in data:
        out.line(f"note: {data['note']}")
        return
    rows = [
        [q["topic"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"],
         time_text(q["lastTimestamp"])]
        for q in data["queues"]
    ]  # fmt: skip
    out.table(
        ("Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "LastTime"),
        rows,
        numeric=("QID", "Broker Offset", "Consumer Offset", "Diff"),
    )
    out.line(f"Consume TPS: {data['consumeTps']:.2f}")
    out.line(f"Diff Total: {data['diffTotal']}")


def _connections(out: Output, connections: list[dict[str, Any]]) -> None:
    rows = [
        [i, c["clientId"], c["clientAddr"], c["language"], c["version"]]
        for i, c in enumerate(connections, start=1)
    ]
    out.table(("#", "Client Id", "Address", "Language", "Version"), rows, numeric=("#",))


def consumer_connection(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    _connections(out, data["connections"])
    out.line("Below is subscription:")
    out.table(("Topic", "Sub Expression"), ([s["topic"], s["subExpression"]] for s in data["subscriptions"]))
    out.line(f"ConsumeType: {data['consumeType']}")
    out.line(f"MessageModel: {data['messageModel']}")
    out.line(f"ConsumeFromWhere: {data['consumeFromWhere']}")


def producer_connection(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    _connections(out, data["connections"])


def reset_offset_by_time(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    out.line(
        f"rollback consumer offset by specified consumerGroup[{data['group']}], topic[{data['topic']}], "
        f"force[{str(data['force']).lower()}], timestamp(string)[{args.timestamp_text}], "
        f"timestamp(long)[{data['timestamp']}]"
    )
    rows = [[r["brokerName"], r["queueId"], r["oldOffset"], r["offset"]] for r in data["offsets"]]
    out.table(
        ("Broker Name", "Queue ID", "Old Offset", "New Offset"),
        rows,
        numeric=("Queue ID", "Old Offset", "New Offset"),
    )
    out.line(
        "note: running consumers of the group keep their own offsets and overwrite this reset with "
        "their next commit; restart them after the reset."
    )


# -- cluster ---------------------------------------------------------------------------------------


def cluster_list(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    brokers = data["brokers"]
    if not brokers and "note" in data:
        out.line(data["note"])
        return
    if args.more_stats:
        rows = [
            [b["cluster"], b["brokerName"], b.get("inTotalYesterday"), b.get("outTotalYesterday"),
             b.get("inTotalToday"), b.get("outTotalToday")]
            for b in brokers
        ]  # fmt: skip
        totals = ("Cluster Name", "Broker Name", "InTotalYest", "OutTotalYest", "InTotalToday",
                  "OutTotalToday")  # fmt: skip
        out.table(totals, rows, numeric=totals[2:])
        return
    rows = []
    for b in brokers:
        if "error" in b:
            rows.append(
                [b["cluster"], b["brokerName"], b["brokerId"], b["addr"], "", "", "", "", "", b["error"]]
            )
            continue
        space = b["commitLogDiskRatio"]
        rows.append(
            [b["cluster"], b["brokerName"], b["brokerId"], b["addr"], b["version"],
             f"{b['inTps']:.2f}({b['sendQueueSize']})", f"{b['outTps']:.2f}({b['pullQueueSize']})",
             b["pageCacheLockTimeMills"], f"{b['hours']:.2f}",
             "" if space is None else f"{space * 100:.2f}%"]
        )  # fmt: skip
    columns = ("Cluster Name", "Broker Name", "BID", "Addr", "Version", "InTPS(LOAD)", "OutTPS(LOAD)",
               "PCWait(ms)", "Hour", "SPACE")  # fmt: skip
    out.table(columns, rows, numeric=("BID", "InTPS(LOAD)", "OutTPS(LOAD)", "PCWait(ms)", "Hour", "SPACE"))


def broker_status(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for addr, table in data["brokers"].items():
        out.pairs(table.items(), title=addr)


def pairs(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    """Key: value lines; nested values as compact JSON (controller-mode verbs)."""
    del args
    out.pairs((k, v if isinstance(v, str | int | bool) else json.dumps(v)) for k, v in data.items())


def update_broker_config(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for addr in data["updated"]:
        out.line(f"update broker config success, {addr} {data['key']}={data['value']}")


# -- messages --------------------------------------------------------------------------------------


def _message_pairs(m: dict[str, Any]) -> list[tuple[str, object]]:
    props = "{" + ", ".join(f"{k}={v}" for k, v in m["properties"].items()) + "}"
    pairs: list[tuple[str, object]] = [
        ("OffsetID", m["offsetMsgId"]),
        ("Msg ID", m["msgId"]),
        ("Topic", m["topic"]),
        ("Tags", f"[{m['tags'] or ''}]"),
        ("Keys", f"[{m['keys'] or ''}]"),
        ("Queue ID", m["queueId"]),
        ("Queue Offset", m["queueOffset"]),
        ("CommitLog Offset", m["commitLogOffset"]),
        ("Reconsume Times", m["reconsumeTimes"]),
        ("Born Timestamp", time_text(m["bornTimestamp"])),
        ("Store Timestamp", time_text(m["storeTimestamp"])),
        ("Born Host", m["bornHost"]),
        ("Store Host", m["storeHost"]),
        ("System Flag", m["sysFlag"]),
        ("Properties", props),
    ]
    if "body" in m:
        pairs.append(("Message Body", m["body"]))
    return pairs


def message_details(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    """queryMsgById and queryMsgByOffset: every field of each message."""
    del args
    for m in data["messages"]:
        out.pairs(_message_pairs(m))


def query_msg_by_key(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    rows = [
        [m["msgId"], m["queueId"], m["queueOffset"], m["keys"], m["tags"], time_text(m["storeTimestamp"]),
         m["offsetMsgId"]]
        for m in data["messages"]
    ]  # fmt: skip
    out.table(
        ("Message ID", "QID", "Offset", "Keys", "Tags", "Store Time", "Offset Msg ID"),
        rows,
        numeric=("QID", "Offset"),
    )


def send_message(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    row = [data["brokerName"], data["queueId"], data["queueOffset"], data["sendStatus"], data["msgId"],
           data["offsetMsgId"]]  # fmt: skip
    out.table(
        ("Broker Name", "QID", "Queue Offset", "Send Result", "MsgId", "Offset Msg ID"),
        [row],
        numeric=("QID", "Queue Offset"),
    )


def _message_rows(messages: list[dict[str, Any]], full_body: bool) -> list[list[object]]:
    return [
        [m.get("brokerName", ""), m["queueId"], m["queueOffset"], m["msgId"], m["tags"], m["keys"],
         time_text(m["storeTimestamp"]), m.get("body", "") if full_body else preview(m.get("body"))]
        for m in messages
    ]  # fmt: skip


MESSAGE_COLUMNS = ("Broker Name", "QID", "Offset", "Msg ID", "Tags", "Keys", "Store Time", "Body")


def consume_message(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    out.table(MESSAGE_COLUMNS, _message_rows(data["messages"], False), numeric=("QID", "Offset"))
    out.line(f"Consumed {len(data['messages'])} message(s) of {data['topic']} as group {data['group']}.")


def print_msg(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for q in data["queues"]:
        out.line(
            f"minOffset={q['minOffset']}, maxOffset={q['maxOffset']}, "
            f"MessageQueue [topic={data['topic']}, brokerName={q['brokerName']}, queueId={q['queueId']}]"
        )
        if q["messages"]:
            messages = [{**m, "brokerName": q["brokerName"]} for m in q["messages"]]
            out.table(MESSAGE_COLUMNS, _message_rows(messages, True), numeric=("QID", "Offset"))


# -- ACL 2.0 (mqadmin's command/auth output) ---------------------------------------------------------

USER_COLUMNS = ("#UserName", "#Password", "#UserType")
ACL_COLUMNS = ("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")


def _java_list(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


def auth_written(verb: str, preposition: str) -> Callable[[Output, dict[str, Any], argparse.Namespace], None]:
    """`<verb> <what> to ADDR success.` per broker written, as mqadmin prints it."""

    def draw(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
        del args
        for addr in data["brokers"]:
            out.line(f"{verb} {preposition} {addr} success.")

    return draw


def _users(out: Output, users: list[dict[str, Any]]) -> None:
    if users:
        out.table(USER_COLUMNS, [(u["username"], u["password"], u["userType"]) for u in users])


def get_user(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    _users(out, data["users"])


def list_user(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    del args
    for users in data["brokers"].values():
        _users(out, users)


def acls(out: Output, data: dict[str, Any], args: argparse.Namespace) -> None:
    """getAcl / listAcl: a row per policy entry (a subject with no policies: one empty row)."""
    del args
    for found in data["brokers"].values():
        rows: list[tuple[str, ...]] = []
        for acl in found:
            if not acl["policies"]:
                rows.append((acl["subject"], "", "", "", "", ""))
            for policy in acl["policies"]:
                for e in policy["entries"]:
                    kind = policy["policyType"] or ""
                    actions, ips = _java_list(e["actions"]), _java_list(e["sourceIps"])
                    rows.append((acl["subject"], kind, e["resource"], actions, ips, e["decision"]))
        if rows:
            out.table(ACL_COLUMNS, rows)
