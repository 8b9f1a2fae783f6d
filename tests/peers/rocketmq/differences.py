"""The reviewed list of differences between RocketMQ 5.3.3 and rocketlite (docs/internals/differential.md
says the same, in the same order; `test_docs_list_every_difference` keeps the two in step).

Two kinds, each with a short key scenarios refer to:

- `ACCEPTED`: differences a RocketMQ user would accept, with the reason. Generic ones are
  normalised by the harness in every scenario (`differential.normalise_*`); the others are named
  per step (`Pair.check(known={label: key})`), and the step must really differ.
- `GAPS`: differences that are rocketlite gaps, not accepted, kept visible: what RocketMQ does and
  what rocketlite does. Some are normalised everywhere so the other scenarios stay readable, and
  pinned by a scenario run without that normalisation (`strict=True`, marked xfail strict); the
  others are named per step like accepted ones. Closing a gap makes its scenario pass, and the
  test then fails until the gap leaves this list.

A difference that is a small rocketlite bug is neither: it is fixed, with the differential step
as its test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Accepted:
    """A difference a RocketMQ user would accept, and why."""

    what: str
    reason: str


@dataclass(frozen=True)
class Gap:
    """A rocketlite gap: what RocketMQ 5.3.3 does, what rocketlite does instead."""

    what: str
    rocketmq: str
    rocketlite: str


ACCEPTED: Final[dict[str, Accepted]] = {
    # -- normalised in every scenario ------------------------------------------------------------
    "clock": Accepted(
        "store timestamps, popTime, indexLastUpdateTimestamp, GET_EARLIEST_MSG_STORETIME's answer",
        "each broker reads its own clock. Scenarios search offsets by each side's own store "
        "timestamps, so SEARCH_OFFSET_BY_TIMESTAMP answers are still compared",
    ),
    "ids": Accepted(
        "offsetMsgId values (msgId fields, records' ids) and commit-log offsets "
        "(preparedTransactionOffset, indexLastUpdatePhyoffset)",
        "an offsetMsgId is the storing broker's address and the record's commit-log offset, both "
        "the broker's own; each id is checked to name the broker that answered, each offset to be "
        "set where RocketMQ sets it",
    ),
    "addresses": Accepted(
        "addresses and ports: route brokerAddrs, born and store hosts",
        "the two brokers listen on different free ports (store hosts are checked to be the answering broker)",
    ),
    "version": Accepted(
        "the version field of answers",
        "each server answers with its own MQVersion ordinal: RocketMQ 5.3.3 479, rocketlite 409 "
        "(V4_9_8); clients only remember it per broker",
    ),
    "remarks": Accepted(
        "remarks, except the status names of pull answers",
        "remarks are text for people; no RocketMQ client branches on them. Both sides' remarks "
        "are kept side by side in the report for review. Pull answers' remarks (FOUND, "
        "OFFSET_OVERFLOW_ONE, NO_MESSAGE_IN_QUEUE...) are GetMessageStatus names and are compared",
    ),
    "java-exception": Accepted(
        "a request RocketMQ fails with an uncaught exception (SYSTEM_ERROR, the remark a Java "
        "exception) that rocketlite refuses with a code of its own (MESSAGE_ILLEGAL, NO_MESSAGE...)",
        "the input is refused by both; rocketlite names the cause instead of a NullPointerException "
        "or NumberFormatException. Where RocketMQ fails and rocketlite serves the request, the "
        "step is compared (and named below when accepted)",
    ),
    "refused-send-fields": Accepted(
        "MSG_REGION and TRACE_ON header fields on refused sends",
        "RocketMQ 5 sets them on the answer before it checks the request; clients read them from "
        "the answer to a stored message only, where both sides send them",
    ),
    "pull-fields": Accepted(
        "topicSysFlag, groupSysFlag and forbiddenType header fields of PULL_MESSAGE answers",
        "RocketMQ 5 adds them; no client, tool or proxy of RocketMQ 5.3.3 reads them (rocketlite "
        "answers the four offsets fields of 4.x)",
    ),
    "route-fields": Accepted(
        "route data: brokerDatas without enableActingMaster=false; queueDatas with topicSynFlag "
        "beside topicSysFlag",
        "enableActingMaster is RocketMQ 5's slave-acting-master switch, which rocketlite does not "
        "have, and false is what readers assume when it is absent; topicSynFlag is RocketMQ <= "
        "4.8's spelling, still read by the Go client, always equal to topicSysFlag",
    ),
    "revive-qid": Accepted(
        "reviveQid of POP_MESSAGE and CHANGE_INVISIBLE_TIME answers",
        "which of its revive queues holds a checkpoint is the broker's choice (RocketMQ has 8); "
        "clients only echo it back in the receipt handle",
    ),
    "origin-message-id": Accepted(
        "ORIGIN_MESSAGE_ID of a message sent back to the retry topic or the DLQ",
        "RocketMQ is not consistent: its broker writes the original's offsetMsgId, its Java "
        "client (when a send-back fails and it re-sends the message itself) the UNIQ_KEY. "
        "rocketlite always writes the UNIQ_KEY, which QUERY_MESSAGE by unique key finds on any "
        "broker. Either is accepted: the message's UNIQ_KEY or an offsetMsgId of the broker",
    ),
    # -- named per step ----------------------------------------------------------------------------
    "stricter-send": Accepted(
        "sends rocketlite refuses and RocketMQ 5.3.3 stores: into the timer topic "
        "rmq_sys_wheel_timer, to a topic without write permission, a batch entry with a DELAY",
        "rocketlite refuses with NO_PERMISSION / MESSAGE_ILLEGAL what RocketMQ's own clients never "
        "send (they check the route's permission and refuse delayed batch entries before "
        "sending) and what would reach RocketMQ's internal timer queue behind its back",
    ),
    "empty-body": Accepted(
        "a send without a body",
        "RocketMQ 5.3.3 fails it with a NullPointerException (its clients refuse an empty body "
        "before sending); rocketlite stores the empty message, as RocketMQ 4.9.8 did",
    ),
    "pop-invisible-zero": Accepted(
        "POP_MESSAGE with invisibleTime 0",
        "RocketMQ 5.3.3 delivers the messages with an invisible time of 0, due for redelivery at "
        "once, which no consumer can use; rocketlite refuses the request naming invisibleTime",
    ),
    "broker-config": Accepted(
        "UPDATE_BROKER_CONFIG with a path key (storePathRootDir, storePathCommitLog) or an unknown key",
        "RocketMQ 5.3.3 applies a new store path to a running broker (only brokerConfigPath is "
        "in its black list) and takes any key; rocketlite refuses path keys with NO_PERMISSION "
        "(CVE-2023-37582 was such a write) and unknown keys with SYSTEM_ERROR naming them",
    ),
    "route-without-topic": Accepted(
        "GET_ROUTEINFO_BY_TOPIC without its topic field",
        "RocketMQ 5.3.3's name server skips the not-null check and answers TOPIC_NOT_EXIST for "
        'the topic "null"; rocketlite answers SYSTEM_ERROR "the custom field <topic> is null", '
        "as RocketMQ answers any other request missing a required field",
    ),
    "send-back-without-origin-topic": Accepted(
        "CONSUMER_SEND_MSG_BACK without originTopic of a message due for the dead-letter queue",
        "RocketMQ 5.3.3 fails it with a NullPointerException; the C++ 1.x client never sends "
        "originTopic, and rocketlite moves the message to %DLQ%group as RocketMQ does with one",
    ),
    "double-commit": Accepted(
        "a second END_TRANSACTION COMMIT for the same half message (a late check answer)",
        "RocketMQ delivers the message a second time; rocketlite answers SUCCESS and delivers it "
        "once (the op queue already marks the half as ended), which is what a transaction promises",
    ),
    "sql92-unparsable": Accepted(
        "PULL_MESSAGE carrying an SQL92 expression that does not compile, or an expression type "
        "other than TAG and SQL92",
        "RocketMQ 5.3.3 delivers every message, unfiltered (its filter data is null when the "
        "expression does not compile, an assert Java runs without, and a null filter matches "
        "all); rocketlite refuses with SUBSCRIPTION_PARSE_FAILED naming the error, the answer "
        "RocketMQ gives the same expression in CHECK_CLIENT_CONFIG and POP",
    ),
}

GAPS: Final[dict[str, Gap]] = {
    # -- normalised in every scenario, pinned by test_gaps.py ---------------------------------------
    "send-context-properties": Gap(
        "MSG_REGION and TRACE_ON properties of sent messages",
        "stores MSG_REGION=<regionId> and TRACE_ON=<traceOn> in every message of SEND_MESSAGE(_V2) "
        "and SEND_BATCH_MESSAGE (AbstractSendMessageProcessor.buildMsgContext), so consumers see "
        "them; the Java client's consume-trace hook takes its regionId from there",
        "stores neither (RocketMQ 4.9.8 stored them only with a send hook registered); the send "
        "answer carries both as header fields, as RocketMQ's does",
    ),
    "transaction-id-property": Gap(
        "__transactionId__ property of a half message (and of the committed message)",
        "stores __transactionId__=<UNIQ_KEY> in the half message, which the committed copy keeps",
        "stores none (the 5.x gRPC path needs it too: issue 22)",
    ),
    "heartbeat-v2": Gap(
        "the answer to HEART_BEAT",
        "answers with IS_SUPPORT_HEART_BEAT_V2=true and IS_SUB_CHANGE=true|false, which a 5.x "
        "client reads to switch to heartbeat v2 (a fingerprint instead of the full subscription)",
        "answers with no header field, so 5.x clients keep sending full heartbeats (issue 22, heartbeat v2)",
    ),
    # -- named per step ----------------------------------------------------------------------------
    "invalid-parameter": Gap(
        "illegal topic names and queue ids (send, pull, POP, UPDATE_AND_CREATE_TOPIC, "
        "DELETE_TOPIC_IN_BROKER)",
        "answers INVALID_PARAMETER (29); RocketMQ 4.9.8 answered SYSTEM_ERROR (1)",
        "answers SYSTEM_ERROR (1), the 4.x code, which the Java client's send retries "
        "(retryResponseCodes holds SYSTEM_ERROR, not INVALID_PARAMETER); the code is not in "
        "rocketlite's ResponseCode yet",
    ),
    "offset-commit-checks": Gap(
        "UPDATE_CONSUMER_OFFSET for a group or topic the broker does not have",
        'refuses: SUBSCRIPTION_GROUP_NOT_EXIST "Group G not exist!", then TOPIC_NOT_EXIST '
        '"Topic T not exist!" (ConsumerManageProcessor.updateConsumerOffset, 5.x)',
        "stores the offset (RocketMQ 4.9.8 did too); a later QUERY_CONSUMER_OFFSET then answers it",
    ),
    "pop-answer-header": Gap(
        "the header of a POP_MESSAGE answer without messages (POLLING_TIMEOUT, TOPIC_NOT_EXIST...)",
        "always sends popTime, invisibleTime, reviveQid and restNum (and startOffsetInfo / "
        "msgOffsetInfo when it looked at queues)",
        "sends no header field; the Java 5.3.3 client decodes the header of a POLLING_TIMEOUT "
        'answer and logs "Failed field [popTime] decoding" for each missing field',
    ),
    "pop-double-ack": Gap(
        "a second ACK_MESSAGE with the same receipt handle",
        "answers SUCCESS again (it appends another ack; a client retrying an ack after a timeout "
        "gets SUCCESS)",
        'answers NO_MESSAGE "acked already or never popped"',
    ),
    "pop-born-time": Gap(
        "POP_MESSAGE whose bornTime is far in the past",
        'answers POLLING_TIMEOUT "pop message is timeout too much" (isTimeoutTooMuch: the request '
        "waited longer than its poll time allows)",
        "serves it",
    ),
}
