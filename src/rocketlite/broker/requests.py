"""Which processor serves which request code: the broker's whole request table in one place.

The controller builds every processor and hands them to `register_requests`; no processor
registers itself. A code missing here is answered REQUEST_CODE_NOT_SUPPORTED (3) by the remoting
layer. REGISTER_BROKER and the other name-server codes go the other way (the broker asks, see
`controller.py`), and the HA port speaks its own protocol (`broker/ha/`), so neither is here.
"""

from __future__ import annotations

from rocketlite.broker.auth.processor import AuthAdminProcessor
from rocketlite.broker.delay.levels import ScheduleMessageService
from rocketlite.broker.live_config import LiveConfig
from rocketlite.broker.pop.processor import PopMessageProcessor
from rocketlite.broker.processors.admin_catalog import AdminCatalogProcessor
from rocketlite.broker.processors.admin_requests import AdminRequestProcessor
from rocketlite.broker.processors.admin_stats import AdminStatsProcessor
from rocketlite.broker.processors.assignment import QueryAssignmentProcessor
from rocketlite.broker.processors.client_relay import ClientRelayProcessor, ResetOffsetGuard
from rocketlite.broker.processors.client_requests import ClientRequestProcessor
from rocketlite.broker.processors.consumer_offset import ConsumerOffsetProcessor
from rocketlite.broker.processors.consumer_send_back import ConsumerSendBackProcessor
from rocketlite.broker.processors.pull import PullMessageProcessor
from rocketlite.broker.processors.pull_lane import PullLane
from rocketlite.broker.processors.query import QueryMessageProcessor
from rocketlite.broker.processors.reply import ReplyMessageProcessor
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.broker.processors.send_batch_lane import SendBatchLane
from rocketlite.broker.processors.send_group import SendGroupLane
from rocketlite.broker.rebalance_lock import RebalanceLockManager
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.protocol.codes import RequestCode as C
from rocketlite.protocol.formats.speedups import encode_group
from rocketlite.protocol.wire import speedups as wire_speedups
from rocketlite.protocol.wire.admin import AdminRequestCode as A
from rocketlite.protocol.wire.pop import PopRequestCode as P
from rocketlite.remoting.connection import Handler, RawGroupHandler, RequestTable, chain_raw


def register_requests(
    table: RequestTable,
    *,
    send: SendMessageProcessor,
    pull: PullMessageProcessor,
    pop: PopMessageProcessor,
    query: QueryMessageProcessor,
    offsets: ConsumerOffsetProcessor,
    send_back: ConsumerSendBackProcessor,
    clients: ClientRequestProcessor,
    locks: RebalanceLockManager,
    transactions: TransactionalMessageService,
    schedule: ScheduleMessageService,
    admin: AdminRequestProcessor,
    live: LiveConfig,
    catalog: AdminCatalogProcessor,
    admin_stats: AdminStatsProcessor,
    relay: ClientRelayProcessor,
    resets: ResetOffsetGuard,
    auth: AuthAdminProcessor,
    reply: ReplyMessageProcessor | None = None,
    assignment: QueryAssignmentProcessor | None = None,
) -> None:
    """Register every request code the broker answers on `table`."""
    handlers: dict[int, Handler] = {
        # producers
        C.SEND_MESSAGE: send.handle_wire,
        C.SEND_MESSAGE_V2: send.handle_wire,
        C.SEND_BATCH_MESSAGE: send.handle_wire,
        C.END_TRANSACTION: transactions.handle_end_transaction,
        # consumers
        C.PULL_MESSAGE: resets.guard_pull(pull.handle),  # a pending offset reset answers first
        P.LITE_PULL_MESSAGE: resets.guard_pull(pull.handle),  # 5.x lite pull: PULL_MESSAGE, another code
        C.CONSUMER_SEND_MSG_BACK: send_back.handle,
        P.POP_MESSAGE: pop.handle_pop,  # 5.x POP consumption
        P.ACK_MESSAGE: pop.handle_ack,
        P.CHANGE_MESSAGE_INVISIBLETIME: pop.handle_change_invisible_time,
        C.QUERY_CONSUMER_OFFSET: offsets.handle_query,
        C.UPDATE_CONSUMER_OFFSET: resets.guard_update(offsets.handle_update),
        C.GET_MAX_OFFSET: offsets.handle_max,
        C.GET_MIN_OFFSET: offsets.handle_min,
        C.GET_EARLIEST_MSG_STORETIME: offsets.handle_earliest,
        C.SEARCH_OFFSET_BY_TIMESTAMP: offsets.handle_search,
        C.LOCK_BATCH_MQ: locks.handle_lock,
        C.UNLOCK_BATCH_MQ: locks.handle_unlock,
        # every client: heartbeats and connections
        C.HEART_BEAT: clients.handle_heartbeat,
        C.UNREGISTER_CLIENT: clients.handle_unregister,
        C.GET_CONSUMER_LIST_BY_GROUP: clients.handle_consumer_list,
        C.GET_CONSUMER_CONNECTION_LIST: clients.handle_consumer_connections,
        C.GET_PRODUCER_CONNECTION_LIST: clients.handle_producer_connections,
        C.CHECK_CLIENT_CONFIG: clients.handle_check_client_config,
        # finding messages
        C.QUERY_MESSAGE: query.handle_query,
        C.VIEW_MESSAGE_BY_ID: query.handle_view,
        # admin: topics, groups, statistics, configuration
        C.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
        C.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
        C.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
        C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: admin.get_system_topic_list,
        C.GET_TOPIC_STATS_INFO: admin.get_topic_stats_info,
        C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_and_create_subscription_group,
        C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_group,
        C.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
        C.QUERY_TOPIC_CONSUME_BY_WHO: admin.query_topic_consume_by_who,
        C.GET_BROKER_RUNTIME_INFO: admin.get_broker_runtime_info,
        C.DELETE_EXPIRED_COMMITLOG: admin.delete_expired_commitlog,
        C.GET_BROKER_CONFIG: live.handle_get,
        C.UPDATE_BROKER_CONFIG: live.handle_update,
        # admin, 5.x: batches and lookups, consumption and traffic, questions relayed to consumers
        A.UPDATE_AND_CREATE_TOPIC_LIST: catalog.update_and_create_topic_list,
        A.GET_TOPIC_CONFIG: catalog.get_topic_config,
        A.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: catalog.update_and_create_subscription_group_list,
        A.GET_SUBSCRIPTIONGROUP_CONFIG: catalog.get_subscription_group_config,
        A.QUERY_TOPICS_BY_CONSUMER: catalog.query_topics_by_consumer,
        A.QUERY_SUBSCRIPTION_BY_CONSUMER: catalog.query_subscription_by_consumer,
        C.GET_ALL_PRODUCER_INFO: catalog.get_all_producer_info,
        C.CLEAN_EXPIRED_CONSUMEQUEUE: catalog.clean_expired_consume_queue,
        C.CLEAN_UNUSED_TOPIC: catalog.clean_unused_topic,
        C.GET_CONSUME_STATS: admin_stats.get_consume_stats,
        C.GET_BROKER_CONSUME_STATS: admin_stats.get_broker_consume_stats,
        C.VIEW_BROKER_STATS_DATA: admin_stats.view_broker_stats_data,
        C.QUERY_CONSUME_QUEUE: admin_stats.query_consume_queue,
        A.GET_BROKER_HA_STATUS: admin_stats.get_broker_ha_status,
        C.INVOKE_BROKER_TO_RESET_OFFSET: relay.invoke_broker_to_reset_offset,
        C.GET_CONSUMER_RUNNING_INFO: relay.get_consumer_running_info,
        C.CONSUME_MESSAGE_DIRECTLY: relay.consume_message_directly,
        # what a slave copies from its master (broker/ha/sync.py)
        C.GET_ALL_CONSUMER_OFFSET: offsets.handle_all,
        C.GET_ALL_DELAY_OFFSET: schedule.handle_get_all_delay_offset,
        # ACL 2.0: users and ACLs (AUTH_* 3001-3010)
        **auth.handlers(),
    }
    if assignment is not None:  # 5.x server-side assignment
        handlers[C.QUERY_ASSIGNMENT] = assignment.handle_query
        handlers[C.SET_MESSAGE_REQUEST_MODE] = assignment.handle_set_mode
    if reply is not None:  # request-reply: the replier's send, pushed to the requester
        handlers[C.SEND_REPLY_MESSAGE] = reply.handle
        handlers[C.SEND_REPLY_MESSAGE_V2] = reply.handle
    for code, handler in handlers.items():
        table.register(code, handler)
    raws: dict[int, RawGroupHandler] = {}
    if encode_group is not None:  # the coalescing lane of single sends (compiled only)
        lane = SendGroupLane(send)
        table.groups[C.SEND_MESSAGE_V2] = lane
        batches = SendBatchLane(send)
        table.groups[C.SEND_BATCH_MESSAGE] = batches
        raws[C.SEND_BATCH_MESSAGE] = batches.raw
        raws[C.SEND_MESSAGE_V2] = lane.raw
    if wire_speedups.CHOSEN is not wire_speedups.REFERENCE:  # the pull lane (compiled only)
        raws[C.PULL_MESSAGE] = PullLane(pull).raw
    table.raw = chain_raw(raws)
