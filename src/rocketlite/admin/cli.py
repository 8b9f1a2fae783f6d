"""`rocketlite admin VERB -n NAMESRV ...`: mqadmin's verbs, with mqadmin's one-letter flags.

The verbs and flags are those of RocketMQ 4.x `mqadmin` (`tools/.../command/*SubCommand.java`), so
scripts and habits carry over: `-n` name server (or env NAMESRV_ADDR), `-t` topic, `-g` group,
`-b`/`-c` broker address / cluster, and each verb's own letters. Boolean options take a value
(`-o true`), as in mqadmin. Every verb also takes `--json` (the data as JSON on stdout, for
scripts), `--timeout` (seconds per request) and `--access-key AK --secret-key SK` (the ACL keys
requests are signed with; without them, `accessKey` / `secretKey` of
`$ROCKETMQ_HOME/conf/tools.yml` as mqadmin reads them, see `credentials`).

This module only parses and dispatches: the operations live in `topics`, `groups`, `cluster`,
`messages` and `transfer` (async functions over `AdminClient`, returning JSON-able data), and
`render` draws the tables. Failures are `AdminError`s; the top-level `rocketlite.cli.main` prints
them as `rocketlite: error: <remark> (NAME, code N)` and exits 2. Argument errors, argparse's and those
found later (`UsageError`, a missing name server), all print the verb's usage and
`rocketlite admin VERB: error: ...` and exit 2; a group nobody is using (`NotOnlineError`) prints
`rocketlite admin VERB: no consumer of group G is online` and exits 1. `-n` is accepted before
the verb too, and only verbs that ask the name server need it (`brokerStatus -b` does not).
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import re
import sys
import time
from datetime import datetime
from typing import Any

from rocketlite.admin import auth_verbs, cluster, controller_mode, groups, messages, render, topics, transfer
from rocketlite.admin.client import (
    DEFAULT_TIMEOUT_S,
    AdminClient,
    NamesrvRequiredError,
    NotOnlineError,
    UsageError,
    split_addresses,
)
from rocketlite.admin.credentials import resolve_credentials
from rocketlite.admin.output import Output, ProgressReporter
from rocketlite.admin.verb import Verb, address
from rocketlite.admin.verb import broker_or_cluster as _broker_or_cluster

_TRUE = ("true", "1", "yes", "y", "on")
_FALSE = ("false", "0", "no", "n", "off")


# -- value types ------------------------------------------------------------------------------------


def java_bool(text: str) -> bool:
    """mqadmin's boolean option values (`true` / `false`)."""
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def timestamp(text: str) -> int:
    """`now`, epoch milliseconds, or local `yyyy-MM-dd#HH:mm:ss:SSS` (mqadmin's formats); ISO 8601
    (`2024-05-01T12:00:00`) is accepted too."""
    value = text.strip()
    if value == "now":
        return int(time.time() * 1000)
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S"):
        try:
            return int(datetime.strptime(value, fmt).timestamp() * 1000)
        except ValueError:
            pass
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS, got {text!r}"
        ) from None


def namesrv_list(text: str) -> str:
    """One or more host:port separated by `;`."""
    parts = split_addresses(text)
    if not parts:
        raise argparse.ArgumentTypeError("expected host:port[;host:port...]")
    for part in parts:
        address(part)
    return ";".join(parts)


def charset(text: str) -> str:
    try:
        return codecs.lookup(text).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {text!r}") from None


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# -- verbs ----------------------------------------------------------------------------------------


def _topic(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("-t", "--topic", required=required, help="topic name")


def _cfg_update_topic(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "create/update the topic")
    _topic(p)
    p.add_argument(
        "-r", "--readQueueNums", dest="read_queue_nums", type=non_negative, default=8, help="default 8"
    )
    p.add_argument(
        "-w", "--writeQueueNums", dest="write_queue_nums", type=non_negative, default=8, help="default 8"
    )
    p.add_argument("-p", "--perm", type=int, choices=(2, 4, 6), default=6, help="2 W, 4 R, 6 RW (default 6)")
    p.add_argument("-o", "--order", type=java_bool, default=False, help="ordered topic: true|false")
    p.add_argument("-u", "--unit", type=java_bool, default=False, help="unit topic: true|false")
    p.add_argument(
        "-s", "--hasUnitSub", dest="has_unit_sub", type=java_bool, default=False, help="true|false"
    )


def _cfg_delete_topic(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="delete from this cluster")


def _cfg_topic_list(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-c", "--clusterModel", dest="cluster_model", action="store_true",
        help="also show each topic's cluster and consumer groups",
    )  # fmt: skip


def _cfg_sub_group(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "create/update the group")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group")
    flags = (
        ("-s", "--consumeEnable", "consume_enable", True),
        ("-m", "--consumeFromMinEnable", "consume_from_min_enable", True),
        ("-d", "--consumeBroadcastEnable", "consume_broadcast_enable", True),
        ("-a", "--notifyConsumerIdsChanged", "notify_consumer_ids_changed_enable", True),
    )
    for short, long, dest, on in flags:
        p.add_argument(short, long, dest=dest, type=java_bool, default=on, help=f"true|false (default {on})")
    numbers = (
        ("-q", "--retryQueueNums", "retry_queue_nums", 1),
        ("-r", "--retryMaxTimes", "retry_max_times", 16),
        ("-i", "--brokerId", "broker_id", 0),
        ("-w", "--whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", 1),
    )
    for short, long, dest, default in numbers:
        p.add_argument(short, long, dest=dest, type=non_negative, default=default, help=f"default {default}")


def _cfg_delete_sub_group(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "delete the group")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group")
    p.add_argument("-r", "--removeOffset", dest="remove_offset", type=java_bool, default=False,
                   help="also remove the group's committed offsets: true|false")  # fmt: skip


def _cfg_group(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=required, help="consumer group")


def _cfg_producer_connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group")
    _topic(p)


def _cfg_cluster_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--moreStats", dest="more_stats", action="store_true", help="message totals")
    p.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")


def _cfg_update_broker_config(p: argparse.ArgumentParser) -> None:
    _cfg_broker_status(p)
    p.add_argument(
        "-k", "--key", required=True, help="config key (RocketMQ name, e.g. flushIntervalCommitLog)"
    )
    p.add_argument("-v", "--value", required=True, help="new value")


def _cfg_broker_status(p: argparse.ArgumentParser) -> None:
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("-b", "--brokerAddr", dest="broker_addr", type=address, help="one broker")
    target.add_argument("-c", "--clusterName", dest="cluster", help="every broker of a cluster")


def _cfg_query_by_id(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--msgId", dest="msg_id", required=True, help="offsetMsgId, or UNIQ_KEY with -t; a,b,..."
    )
    _topic(p, required=False)
    p.add_argument("--charset", type=charset, default="utf-8", help="body charset (default UTF-8)")


def _cfg_query_by_key(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-k", "--msgKey", dest="key", required=True, help="message key")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=timestamp, default=0, help="store time from")
    p.add_argument("-e", "--endTimestamp", dest="end", type=timestamp, default=messages.MAX_TIMESTAMP,
                   help="store time to")  # fmt: skip
    p.add_argument("-c", "--maxNum", dest="max_num", type=positive, default=64, help="at most (default 64)")


def _cfg_query_by_offset(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=non_negative, required=True, help="queue offset")


def _cfg_reset_offset(p: argparse.ArgumentParser) -> None:
    _cfg_group(p)
    _topic(p)
    p.add_argument("-s", "--timestamp", dest="timestamp_text", required=True,
                   help="now, epoch ms, or yyyy-MM-dd#HH:mm:ss:SSS; -1 = the end of each queue")  # fmt: skip
    p.add_argument("-f", "--force", type=java_bool, default=True,
                   help="true (default): move forward too; false: only move back")  # fmt: skip


def _cfg_send(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8)")
    p.add_argument("-k", "--key", dest="keys", help="message keys (space-separated)")
    p.add_argument("-c", "--tags", help="message tag")
    p.add_argument("-b", "--broker", dest="broker_name", help="send to this broker name")
    p.add_argument("-i", "--qid", dest="queue_id", type=non_negative, help="send to this queue id")


def _cfg_consume(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", help="only this broker")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, help="only this queue")
    p.add_argument("-o", "--offset", type=non_negative, help="start offset (needs -b and -i)")
    tools = messages.TOOLS_CONSUMER_GROUP
    p.add_argument("-g", "--consumerGroup", dest="group", default=tools,
                   help=f"pull as this group (default {tools}); nothing is committed")  # fmt: skip
    p.add_argument("-s", "--beginTimestamp", dest="begin", type=timestamp, help="store time from")
    p.add_argument("-e", "--endTimestamp", dest="end", type=timestamp, help="store time to")
    p.add_argument(
        "-c", "--MessageNumber", dest="count", type=positive, default=128, help="at most (default 128)"
    )


def _cfg_print(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-c", "--charsetName", dest="charset", type=charset, default="utf-8", help="default UTF-8")
    p.add_argument("-s", "--subExpression", dest="expression", default="*", help="tag expression (default *)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=timestamp, help="store time from")
    p.add_argument("-e", "--endTimestamp", dest="end", type=timestamp, help="store time to")
    p.add_argument("-d", "--printBody", dest="print_body", type=java_bool, default=True, help="true|false")


def _sub_group_config(args: argparse.Namespace) -> dict[str, Any]:
    return groups.subscription_group_json(
        args.group,
        consume_enable=args.consume_enable,
        consume_from_min_enable=args.consume_from_min_enable,
        consume_broadcast_enable=args.consume_broadcast_enable,
        retry_queue_nums=args.retry_queue_nums,
        retry_max_times=args.retry_max_times,
        broker_id=args.broker_id,
        which_broker_when_consume_slowly=args.which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=args.notify_consumer_ids_changed_enable,
    )


def _reset_timestamp(args: argparse.Namespace) -> int:
    try:
        return timestamp(args.timestamp_text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"argument -s/--timestamp: {exc}") from None


def _controller(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--controllerAddress", dest="controller", type=address, required=True,
                   help="a controller, host:port")  # fmt: skip


def _cfg_sync_state(p: argparse.ArgumentParser) -> None:
    _controller(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="the broker group")


def _cfg_elect(p: argparse.ArgumentParser) -> None:
    _cfg_sync_state(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="its cluster")
    p.add_argument("-i", "--brokerId", dest="broker_id", type=positive, required=True,
                   help="the replica to make master (a SyncStateSet member)")  # fmt: skip


def _cfg_epoch(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="the broker group")


VERBS: tuple[Verb, ...] = (
    Verb("updateTopic", "Update or create topic", _cfg_update_topic,
         lambda a, ns: topics.update_topic(
             a, topic=ns.topic, broker_addr=ns.broker_addr, cluster=ns.cluster,
             read_queue_nums=ns.read_queue_nums, write_queue_nums=ns.write_queue_nums, perm=ns.perm,
             order=ns.order, unit=ns.unit, has_unit_sub=ns.has_unit_sub),
         render.update_topic),
    Verb("deleteTopic", "Delete topic from broker and NameServer", _cfg_delete_topic,
         lambda a, ns: topics.delete_topic(a, topic=ns.topic, cluster=ns.cluster), render.delete_topic),
    Verb("topicList", "Fetch all topic list from name server", _cfg_topic_list,
         lambda a, ns: topics.topic_list(a, cluster_mode=ns.cluster_model), render.topic_list),
    Verb("topicRoute", "Examine topic route info", _topic,
         lambda a, ns: topics.topic_route(a, topic=ns.topic), render.topic_route),
    Verb("topicStatus", "Examine topic status info", _topic,
         lambda a, ns: topics.topic_status(a, topic=ns.topic), render.topic_status),
    Verb("updateSubGroup", "Update or create subscription group", _cfg_sub_group,
         lambda a, ns: groups.update_sub_group(
             a, broker_addr=ns.broker_addr, cluster=ns.cluster, config=_sub_group_config(ns)),
         render.update_sub_group),
    Verb("deleteSubGroup", "Delete subscription group from broker", _cfg_delete_sub_group,
         lambda a, ns: groups.delete_sub_group(
             a, group=ns.group, broker_addr=ns.broker_addr, cluster=ns.cluster,
             remove_offset=ns.remove_offset),
         render.delete_sub_group),
    Verb("consumerProgress", "Query consumer's progress (lag per queue); all groups without -g",
         lambda p: _cfg_group(p, required=False),
         lambda a, ns: groups.consumer_progress(a, group=ns.group), render.consumer_progress),
    Verb("consumerConnection", "Query consumer's connections, client versions and subscriptions", _cfg_group,
         lambda a, ns: groups.consumer_connection(a, group=ns.group), render.consumer_connection),
    Verb("producerConnection", "Query producer's connections and client versions", _cfg_producer_connection,
         lambda a, ns: groups.producer_connection(a, group=ns.group, topic=ns.topic),
         render.producer_connection),
    Verb("clusterList", "List all clusters and their brokers", _cfg_cluster_list,
         lambda a, ns: cluster.cluster_list(a, cluster=ns.cluster), render.cluster_list),
    Verb("getBrokerConfig", "Get broker config by cluster or special broker", _cfg_broker_status,
         lambda a, ns: cluster.get_broker_config(a, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.broker_status),
    Verb("updateBrokerConfig", "Update broker's config at run time", _cfg_update_broker_config,
         lambda a, ns: cluster.update_broker_config(
             a, broker_addr=ns.broker_addr, cluster=ns.cluster, key=ns.key, value=ns.value),
         render.update_broker_config),
    Verb("brokerStatus", "Fetch broker runtime status data", _cfg_broker_status,
         lambda a, ns: cluster.broker_status(a, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.broker_status),
    Verb("queryMsgById", "Query message by offsetMsgId (or by UNIQ_KEY with -t)", _cfg_query_by_id,
         lambda a, ns: messages.query_msg_by_id(
             a, msg_ids=[i.strip() for i in ns.msg_id.split(",") if i.strip()], topic=ns.topic,
             charset=ns.charset),
         render.message_details),
    Verb("queryMsgByKey", "Query message by key", _cfg_query_by_key,
         lambda a, ns: messages.query_msg_by_key(
             a, topic=ns.topic, key=ns.key, begin=ns.begin, end=ns.end, max_num=ns.max_num),
         render.query_msg_by_key),
    Verb("queryMsgByOffset", "Query message by queue offset", _cfg_query_by_offset,
         lambda a, ns: messages.query_msg_by_offset(
             a, topic=ns.topic, broker_name=ns.broker_name, queue_id=ns.queue_id, offset=ns.offset),
         render.message_details),
    Verb("resetOffsetByTime", "Reset a group's committed offsets by store time (stop its consumers first)",
         _cfg_reset_offset,
         lambda a, ns: groups.reset_offset_by_time(
             a, group=ns.group, topic=ns.topic, timestamp=_reset_timestamp(ns), force=ns.force),
         render.reset_offset_by_time),
    Verb("sendMessage", "Send a message", _cfg_send,
         lambda a, ns: transfer.send_message(
             a, topic=ns.topic, body=ns.body.encode("utf-8"), keys=ns.keys, tags=ns.tags,
             broker_name=ns.broker_name, queue_id=ns.queue_id),
         render.send_message),
    Verb("consumeMessage", "Consume (read) messages without committing offsets", _cfg_consume,
         lambda a, ns: transfer.consume_message(
             a, topic=ns.topic, broker_name=ns.broker_name, queue_id=ns.queue_id, offset=ns.offset,
             group=ns.group, begin=ns.begin, end=ns.end, count=ns.count),
         render.consume_message),
    Verb("printMsg", "Print every message of a topic", _cfg_print,
         lambda a, ns: transfer.print_msg(
             a, topic=ns.topic, charset=ns.charset, expression=ns.expression, begin=ns.begin, end=ns.end,
             print_body=ns.print_body),
         render.print_msg),
    Verb("getControllerMetaData", "Get the controller's metadata (controller mode)", _controller,
         lambda a, ns: controller_mode.get_controller_metadata(a, controller=ns.controller), render.pairs),
    Verb("getSyncStateSet", "Get a broker group's master, epochs and SyncStateSet (controller mode)",
         _cfg_sync_state,
         lambda a, ns: controller_mode.get_sync_state_set(
             a, controller=ns.controller, broker_name=ns.broker_name),
         render.pairs),
    Verb("electMaster", "Make a SyncStateSet member the master (controller mode)", _cfg_elect,
         lambda a, ns: controller_mode.elect_master(
             a, controller=ns.controller, cluster=ns.cluster, broker_name=ns.broker_name,
             broker_id=ns.broker_id),
         render.pairs),
    Verb("getBrokerEpoch", "Get the epoch entries of a broker group's replicas (controller mode)", _cfg_epoch,
         lambda a, ns: controller_mode.get_broker_epoch(a, broker_name=ns.broker_name), render.pairs),
    *auth_verbs.AUTH_VERBS,
)  # fmt: skip


# -- dispatch -------------------------------------------------------------------------------------


class VerbParser(argparse.ArgumentParser):
    """A verb's parser: flags it does not know are its own error, shown with its own usage.

    argparse leaves a subcommand's unknown flags to the top-level parser, which prints
    `rocketlite`'s usage; here `topicRoute -t X -x foo` prints topicRoute's usage and
    `rocketlite admin topicRoute: error: unrecognized arguments: -x foo` (exit 2), the shape of
    every argument error of a verb."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def run_verb(verb: Verb, args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one verb on a fresh event loop; print JSON or tables. Errors propagate to `main`,
    except a missing name server, which is a usage error of the verb (`parser`)."""
    reporter = ProgressReporter(enabled=not args.json and sys.stderr.isatty())
    namesrv = args.namesrv or getattr(args, "namesrv_before_verb", None)

    async def go() -> dict[str, Any]:
        credentials = resolve_credentials(args.access_key, args.secret_key)
        async with AdminClient(
            namesrv, timeout=args.timeout, reporter=reporter, credentials=credentials
        ) as admin:
            return await verb.run(admin, args)

    try:
        data = asyncio.run(go())
    except (NamesrvRequiredError, UsageError) as exc:
        if parser is None:
            raise
        parser.print_usage(sys.stderr)  # argparse's own shape, but returned: main() still returns
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except NotOnlineError as exc:
        print(f"rocketlite admin {args.admin_command}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        verb.render(Output(), data, args)
    return 0


def _common_options() -> VerbParser:
    common = VerbParser(add_help=False)
    env = os.environ.get("NAMESRV_ADDR") or None
    common.add_argument(
        "-n", "--namesrvAddr", dest="namesrv", type=namesrv_list, default=env,
        metavar="HOST:PORT[;HOST:PORT]",
        help="name server address(es); default: env NAMESRV_ADDR (not needed with -b BROKER alone)",
    )  # fmt: skip
    common.add_argument("--json", action="store_true", help="print the result as JSON (for scripts)")
    common.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds per request (default {DEFAULT_TIMEOUT_S:g})",
    )
    keys = "default: accessKey/secretKey of $ROCKETMQ_HOME/conf/tools.yml"
    common.add_argument("--access-key", dest="access_key", metavar="AK", help=f"ACL access key ({keys})")
    common.add_argument(
        "--secret-key", dest="secret_key", metavar="SK", help="ACL secret key (with --access-key)"
    )
    return common


def add_admin_parser(sub: Any) -> argparse.ArgumentParser:
    """Add `admin` and its verbs to the top-level subparsers of `rocketlite`."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "admin",
        help="mqadmin-style administration (topics, groups, offsets, messages)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "-n", "--namesrvAddr", dest="namesrv_before_verb", type=namesrv_list, default=None,
        metavar="HOST:PORT[;HOST:PORT]", help="name server address(es), also accepted after the verb",
    )  # fmt: skip
    verbs = parser.add_subparsers(
        dest="admin_command", required=True, metavar="VERB", parser_class=VerbParser
    )
    common = _common_options()
    for verb in VERBS:
        p = verbs.add_parser(verb.name, help=verb.help, description=verb.help, parents=[common])
        verb.configure(p)
        p.set_defaults(func=lambda args, verb=verb, p=p: run_verb(verb, args, p))
    return parser
