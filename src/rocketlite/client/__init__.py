"""rocketlite.client: a pure-Python RocketMQ 4.x client (remoting protocol), asyncio-native.

Two flavours of every client, same arguments:

* asyncio: `AsyncProducer`, `AsyncTransactionProducer`, `AsyncPushConsumer`, `AsyncPullConsumer`
  (`await start()` / `await close()`, or `async with`); listeners may be coroutines;
* blocking: `Producer`, `TransactionProducer`, `PushConsumer`, `PullConsumer`, running the async
  core on one shared background loop (`with Producer(...) as p: p.send(...)`).

Quick start::

    from rocketlite.client import Producer, PushConsumer, Message, ConsumeStatus

    with Producer("pg", "127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicTest", b"hello", tags="TagA", keys="order-1"))

    consumer = PushConsumer("cg", "127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")  # or MessageSelector.by_sql("a > 5")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()

Against a broker with ACL (`aclEnable=true`) give every client the account's keys, which it signs
each request with (Java's `AclClientRPCHook`); a refusal raises `NoPermissionError` (code 16)::

    Producer("pg", "127.0.0.1:9876", access_key="RocketMQ", secret_key="12345678")
    PushConsumer("cg", "127.0.0.1:9876", access_key="RocketMQ", secret_key="12345678")

Errors are `ClientError`s (a `rocketlite.protocol.errors.RocketliteError`) carrying `response_code` and
`retriable`; `for_code(code, remark)` maps a response code to its class.
"""

from rocketlite.client.config import ClientConfig
from rocketlite.client.consume_service import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
)
from rocketlite.client.consumer_pull import AsyncPullConsumer
from rocketlite.client.consumer_push import AsyncPushConsumer
from rocketlite.client.errors import (
    BrokerError,
    BrokerSystemError,
    ClientError,
    ClientStateError,
    FlowControlError,
    MessageIllegalError,
    NoPermissionError,
    NoRouteError,
    QueryNotFoundError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    SubscriptionNotExistError,
    SubscriptionParseError,
    SystemBusyError,
    TopicNotExistError,
    for_code,
)
from rocketlite.client.message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from rocketlite.client.producer import (
    AsyncProducer,
    MessageQueueSelector,
    select_by_hash,
    select_by_sharding_key,
    select_random,
)
from rocketlite.client.request_reply import RequestTimeoutError, create_reply_message
from rocketlite.client.selector import MessageSelector
from rocketlite.client.sync import Producer, PullConsumer, PushConsumer, TransactionProducer
from rocketlite.client.transaction import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
)
from rocketlite.protocol.allocate import allocate_averagely, allocate_averagely_by_circle
from rocketlite.protocol.bodies.heartbeat import ConsumeFromWhere, MessageModel

__all__ = [
    "AsyncProducer",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "AsyncTransactionProducer",
    "BrokerError",
    "BrokerSystemError",
    "ClientConfig",
    "ClientError",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "FlowControlError",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageIllegalError",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "NoPermissionError",
    "NoRouteError",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "QueryNotFoundError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "RequestTimeoutError",
    "SendResult",
    "SendStatus",
    "ServiceNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionParseError",
    "SystemBusyError",
    "TopicNotExistError",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "create_reply_message",
    "for_code",
    "select_by_hash",
    "select_by_sharding_key",
    "select_random",
]
