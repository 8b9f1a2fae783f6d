"""mqadmin 5.3.3's 89 sub-commands, as this suite treats them: each is either run against rocketlite
by a test of test_mqadmin.py or test_acl2.py (`RUN_BY`: the test that runs it and checks its output
against the cluster's state) or left out, for the reason given (`LEFT_OUT`). test_mqadmin.py checks that the
two cover every command MQAdminStartup registers, and test_docs_table.py that docs/operations/mqadmin.md
says the same."""

from __future__ import annotations

from typing import Final

CONTROLLER = "controller mode only (automatic master election, a RocketMQ 5 controller); not built"
ROCKSDB = "RocksDB-backed metadata or consume queues only; rocketlite keeps RocketMQ's file formats"
COLD_DATA = "cold-data read flow control (throttling reads that miss the page cache); not built"
STATIC_TOPICS = "static topics (logical queues mapped over brokers); not built"
CONTAINER = "BrokerContainer only (several brokers in one process)"
ACL2_COPY = (
    "copies users or ACLs between two brokers (get on one, create/update on the other): not tested, "
    "the suite runs one broker"
)

RUN_BY: Final[dict[str, str]] = {
    # topics
    "updateTopic": "test_topic_lifecycle",
    "topicRoute": "test_topic_lifecycle",
    "topicList": "test_topic_lifecycle",
    "topicClusterList": "test_topic_lifecycle",
    "updateTopicPerm": "test_topic_lifecycle",
    "updateTopicList": "test_topic_lifecycle",
    "deleteTopic": "test_topic_lifecycle",
    "topicStatus": "test_messages",
    "allocateMQ": "test_consumers",
    "updateOrderConf": "test_name_server",
    # groups
    "updateSubGroup": "test_groups",
    "setConsumeMode": "test_groups",
    "updateSubGroupList": "test_groups",
    "getConsumerConfig": "test_groups",
    "deleteSubGroup": "test_groups",
    # messages
    "sendMessage": "test_messages",
    "queryMsgById": "test_messages",
    "queryMsgByKey": "test_messages",
    "queryMsgByUniqueKey": "test_messages",
    "queryMsgByOffset": "test_messages",
    "printMsg": "test_messages",
    "printMsgByQueue": "test_messages",
    "consumeMessage": "test_messages",
    "queryCq": "test_messages",
    "sendMsgStatus": "test_messages",
    "checkMsgSendRT": "test_messages",
    "clusterRT": "test_messages",
    "queryMsgTraceById": "test_message_trace",
    # consumers, producers, offsets
    "consumerConnection": "test_consumers",
    "producerConnection": "test_consumers",
    "producer": "test_consumers",
    "consumerProgress": "test_consumers",
    "consumerStatus": "test_consumers",
    "brokerConsumeStats": "test_consumers",
    "statsAll": "test_consumers",
    "cloneGroupOffset": "test_consumers",
    "resetOffsetByTime": "test_consumers",
    "skipAccumulatedMessage": "test_consumers",
    "startMonitoring": "test_monitoring_starts",
    # name server
    "updateKvConfig": "test_name_server",
    "deleteKvConfig": "test_name_server",
    "wipeWritePerm": "test_name_server",
    "addWritePerm": "test_name_server",
    "getNamesrvConfig": "test_name_server",
    # broker
    "clusterList": "test_broker",
    "brokerStatus": "test_broker",
    "getBrokerConfig": "test_broker",
    "updateBrokerConfig": "test_broker",
    "deleteExpiredCommitLog": "test_retention",
    "cleanExpiredCQ": "test_retention",
    "cleanUnusedTopic": "test_retention",
    "haStatus": "test_broker",
    "exportMetadata": "test_exports",
    "exportConfigs": "test_exports",
    "exportMetrics": "test_exports",
    # ACL 2.0 users and policies (test_acl2.py)
    "createUser": "test_mqadmin_creates_and_updates_users",
    "updateUser": "test_mqadmin_creates_and_updates_users",
    "deleteUser": "test_mqadmin_creates_and_updates_users",
    "getUser": "test_mqadmin_creates_and_updates_users",
    "listUser": "test_mqadmin_creates_and_updates_users",
    "createAcl": "test_mqadmin_acl_commands_match_the_brokers_acls",
    "updateAcl": "test_mqadmin_acl_commands_match_the_brokers_acls",
    "deleteAcl": "test_mqadmin_acl_commands_match_the_brokers_acls",
    "getAcl": "test_mqadmin_acl_commands_match_the_brokers_acls",
    "listAcl": "test_mqadmin_acl_commands_match_the_brokers_acls",
}

LEFT_OUT: Final[dict[str, str]] = {
    "updateNamesrvConfig": (
        "refused on purpose (NO_PERMISSION): the name server never rewrites its config remotely "
        "(CVE-2023-37582)"
    ),
    "resetMasterFlushOffset": (
        "controller-mode replication only (a slave's masterFlushedOffset, used when it truncates to "
        "a newly elected master); not built"
    ),
    "addBroker": CONTAINER,
    "removeBroker": CONTAINER,
    "updateStaticTopic": STATIC_TOPICS,
    "remappingStaticTopic": STATIC_TOPICS,
    "getSyncStateSet": CONTROLLER,
    "getBrokerEpoch": CONTROLLER,
    "getControllerMetaData": CONTROLLER,
    "getControllerConfig": CONTROLLER,
    "updateControllerConfig": CONTROLLER,
    "electMaster": CONTROLLER,
    "cleanBrokerMetadata": CONTROLLER,
    "exportMetadataInRocksDB": ROCKSDB,
    "exportPopRecord": ROCKSDB,
    "rocksDBConfigToJson": ROCKSDB,
    "checkRocksdbCqWriteProgress": ROCKSDB,
    "dumpCompactionLog": "compaction topics (cleanup.policy=COMPACTION) and their compaction log; not built",
    "getColdDataFlowCtrInfo": COLD_DATA,
    "updateColdDataFlowCtrGroupConfig": COLD_DATA,
    "removeColdDataFlowCtrGroupConfig": COLD_DATA,
    "setCommitLogReadAheadMode": "commit-log read-ahead control (madvise on the mapped segments); not built",
    "copyUser": ACL2_COPY,
    "copyAcl": ACL2_COPY,
}
