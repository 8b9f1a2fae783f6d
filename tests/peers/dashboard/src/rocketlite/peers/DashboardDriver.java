package rocketlite.peers;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.trace.TraceBean;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.stats.Stats;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.RollbackStats;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.BrokerStatsData;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.ConsumeMessageDirectlyResult;
import org.apache.rocketmq.remoting.protocol.body.ConsumeStatus;
import org.apache.rocketmq.remoting.protocol.body.ConsumerConnection;
import org.apache.rocketmq.remoting.protocol.body.ConsumerRunningInfo;
import org.apache.rocketmq.remoting.protocol.body.Connection;
import org.apache.rocketmq.remoting.protocol.body.GroupList;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.body.ProcessQueueInfo;
import org.apache.rocketmq.remoting.protocol.body.ProducerConnection;
import org.apache.rocketmq.remoting.protocol.body.SubscriptionGroupWrapper;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.admin.api.MessageTrack;
import org.apache.rocketmq.tools.command.CommandUtil;
import org.apache.rocketmq.tools.command.stats.StatsAllSubCommand;

/**
 * What rocketmq-dashboard's services ask of a cluster, asked through RocketMQ 5.3.3's own admin API.
 *
 * <p>The dashboard (apache/rocketmq-dashboard, 2.1 line, built on RocketMQ 5.3.3) serves each page
 * from a service class that calls {@code MQAdminExt} (a pooled {@code DefaultMQAdminExt}), and for
 * a few pages a producer or a pull consumer of its own. Each call here is one such service method:
 * the same admin methods, in the same order, with the same arguments and fallbacks, so the requests
 * rocketlite gets are the ones the dashboard would send. The call names are page.method
 * ("topic.stats", "consumer.resetOffset", ...); docs/operations/dashboard.md lists them.
 *
 * <p>One JVM, one admin client, configured as the dashboard's MQAdminFactory does (admin group with a
 * suffix, the VIP channel on: the dashboard's default, instance name = start time). A line on stdin
 * is {"id": n, "call": "...", "args": {...}}; each answer is one line {"event": "result", "id": n,
 * "call": "...", "result": ..., "error": {...} or null, "ms": n}. The first line is {"event":
 * "ready", "calls": [...]}. Results are plain JSON built here (maps, lists, strings, numbers), not
 * the RocketMQ objects themselves, whose maps have non-string keys.
 */
public final class DashboardDriver {
    private static final PrintStream STDOUT = System.out;
    private static final int QUERY_MESSAGE_MAX_NUM = 64; // the dashboard's MessageServiceImpl
    private static final int MESSAGE_PAGE_LIMIT = 2000;

    private final DefaultMQAdminExt admin;
    private final String namesrv;
    private final AclPage aclPage;
    private DefaultMQProducer systemTopicProducer;
    private DefaultMQPullConsumer toolsConsumer;

    private DashboardDriver(DefaultMQAdminExt admin, String namesrv) {
        this.admin = admin;
        this.namesrv = namesrv;
        this.aclPage = new AclPage(admin);
    }

    private static final List<String> CALLS = List.of(
        "cluster.list", "cluster.brokerConfig",
        "dashboard.collectBroker", "dashboard.collectTopic",
        "topic.list", "topic.listTypes", "topic.stats", "topic.route", "topic.consumers",
        "topic.createOrUpdate", "topic.examineConfig", "topic.delete", "topic.sendMessage",
        "consumer.groupList", "consumer.topicsOfGroup", "consumer.connection", "consumer.runningInfo",
        "consumer.examineConfig", "consumer.createOrUpdate", "consumer.delete", "consumer.resetOffset",
        "producer.connection",
        "message.byTopic", "message.byKey", "message.view", "message.resend",
        "trace.query",
        "dlq.query", "dlq.batchResend",
        "acl.listUsers", "acl.listAcls", "acl.createUser", "acl.updateUser", "acl.deleteUser",
        "acl.createAcl", "acl.updateAcl", "acl.deleteAcl");

    public static void main(String[] argv) {
        try {
            run(argv[0], argv.length > 2 ? new AclClientRPCHook(new SessionCredentials(argv[1], argv[2])) : null);
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }

    /** With an access key and a secret key (argv 1 and 2) the admin client signs its requests, as the
     * dashboard's does when `rocketmq.config.accessKey` and `secretKey` are set. */
    private static void run(String namesrv, RPCHook rpcHook) throws Exception {
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        DefaultMQAdminExt admin = new DefaultMQAdminExt(rpcHook);
        admin.setAdminExtGroup(admin.getAdminExtGroup() + "_0");
        admin.setVipChannelEnabled(true);
        admin.setUseTLS(false);
        admin.setInstanceName(Long.toString(System.currentTimeMillis()));
        admin.setNamesrvAddr(namesrv);
        admin.start();
        DashboardDriver driver = new DashboardDriver(admin, namesrv);
        emit(map("event", "ready", "calls", CALLS));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            JSONObject request = JSON.parseObject(line);
            String call = request.getString("call");
            JSONObject args = request.getJSONObject("args");
            long start = System.nanoTime();
            Object result = null;
            Map<String, Object> error = null;
            try {
                result = driver.dispatch(call, args == null ? new JSONObject() : args);
            } catch (Exception e) {
                error = error(e);
            }
            long ms = (System.nanoTime() - start) / 1_000_000;
            emit(map("event", "result", "id", request.getLongValue("id"), "call", call, "result", result,
                "error", error, "ms", ms));
        }
        System.exit(0); // the clients' threads are not all daemons
    }

    private Object dispatch(String call, JSONObject a) throws Exception {
        switch (call) {
            case "cluster.list": return clusterList();
            case "cluster.brokerConfig": return new TreeMap<>(admin.getBrokerConfig(a.getString("brokerAddr")));
            case "dashboard.collectBroker": return collectBroker();
            case "dashboard.collectTopic": return collectTopic(a.getString("topic"));
            case "topic.list": return topicList();
            case "topic.listTypes": return topicTypes();
            case "topic.stats": return topicStats(a.getString("topic"));
            case "topic.route": return route(admin.examineTopicRouteInfo(a.getString("topic")));
            case "topic.consumers": return topicConsumers(a.getString("topic"));
            case "topic.createOrUpdate": return topicCreateOrUpdate(a);
            case "topic.examineConfig": return topicExamineConfig(a.getString("topic"));
            case "topic.delete": return topicDelete(a.getString("topic"), a.getString("clusterName"));
            case "topic.sendMessage": return sendMessage(a);
            case "consumer.groupList": return groupList();
            case "consumer.topicsOfGroup": return topicsOfGroup(a.getString("group"), a.getString("address"));
            case "consumer.connection":
                return connection(admin.examineConsumerConnectionInfo(a.getString("group"), a.getString("address")));
            case "consumer.runningInfo":
                return runningInfo(admin.getConsumerRunningInfo(a.getString("group"), a.getString("clientId"),
                    a.getBooleanValue("jstack")));
            case "consumer.examineConfig": return examineGroupConfig(a.getString("group"));
            case "consumer.createOrUpdate": return groupCreateOrUpdate(a);
            case "consumer.delete": return groupDelete(a.getString("group"), strings(a, "brokerNameList"));
            case "consumer.resetOffset": return resetOffset(a);
            case "producer.connection": return producerConnection(a.getString("group"), a.getString("topic"));
            case "message.byTopic": return byTopic(a.getString("topic"), a.getLongValue("begin"), a.getLongValue("end"));
            case "message.byKey": return byKey(a.getString("topic"), a.getString("key"));
            case "message.view": return viewMessage(a.getString("topic"), a.getString("msgId"));
            case "message.resend":
                return directResult(consumeDirectly(a.getString("topic"), a.getString("msgId"), a.getString("group"),
                    a.getString("clientId")));
            case "trace.query": return traceQuery(a.getString("topic"), a.getString("msgId"));
            case "dlq.query": return dlqQuery(a.getString("group"), a.getLongValue("begin"), a.getLongValue("end"));
            case "dlq.batchResend": return batchResend(a.getJSONArray("messages"));
            default:
                if (call.startsWith("acl.")) {
                    return aclPage.dispatch(call, a);
                }
                throw new IllegalArgumentException("unknown call " + call);
        }
    }

    // -- Cluster page (ClusterServiceImpl.list, getBrokerConfig) and the Ops page's pool check ----
    private Object clusterList() throws Exception {
        ClusterInfo info = admin.examineBrokerClusterInfo();
        Map<String, Object> brokers = new TreeMap<>();
        for (Map.Entry<String, BrokerData> e : info.getBrokerAddrTable().entrySet()) {
            Map<String, Object> runtime = new TreeMap<>();
            for (Map.Entry<Long, String> addr : e.getValue().getBrokerAddrs().entrySet()) {
                runtime.put(addr.getKey().toString(), admin.fetchBrokerRuntimeStats(addr.getValue()).getTable());
            }
            brokers.put(e.getKey(), map("cluster", e.getValue().getCluster(),
                "addrs", stringKeys(e.getValue().getBrokerAddrs()), "runtime", runtime));
        }
        Map<String, Object> clusters = new TreeMap<>();
        info.getClusterAddrTable().forEach((k, v) -> clusters.put(k, new ArrayList<>(new java.util.TreeSet<>(v))));
        return map("clusters", clusters, "brokers", brokers);
    }

    // -- Dashboard page (DashboardCollectTask.collectBroker, CollectTaskRunnble) ------------------
    private Object collectBroker() throws Exception {
        ClusterInfo info = admin.examineBrokerClusterInfo();
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, BrokerData> e : info.getBrokerAddrTable().entrySet()) {
            for (Map.Entry<Long, String> addr : e.getValue().getBrokerAddrs().entrySet()) {
                KVTable kv = admin.fetchBrokerRuntimeStats(addr.getValue());
                String[] tps = kv.getTable().get("getTotalTps").split(" ");
                java.math.BigDecimal total = java.math.BigDecimal.ZERO;
                for (String t : tps) {
                    total = total.add(new java.math.BigDecimal(t));
                }
                out.put(e.getKey() + ":" + addr.getKey(), map("getTotalTps", kv.getTable().get("getTotalTps"),
                    "averageTps", total.divide(new java.math.BigDecimal(tps.length), 5,
                        java.math.RoundingMode.HALF_UP).toString()));
            }
        }
        return out;
    }

    private Object collectTopic(String topic) throws Exception {
        boolean listed = admin.fetchAllTopicList().getTopicList().contains(topic);
        TopicRouteData route = admin.examineTopicRouteInfo(topic);
        GroupList groups = admin.queryTopicConsumeByWho(topic);
        double inTps = 0;
        long inToday = 0;
        double outTps = 0;
        long outToday = 0;
        List<String> errors = new ArrayList<>();
        for (BrokerData bd : route.getBrokerDatas()) {
            String master = bd.getBrokerAddrs().get(MixAll.MASTER_ID);
            try {
                BrokerStatsData put = admin.viewBrokerStatsData(master, Stats.TOPIC_PUT_NUMS, topic);
                inTps += put.getStatsMinute().getTps();
                inToday += StatsAllSubCommand.compute24HourSum(put);
            } catch (Exception e) {
                errors.add(Stats.TOPIC_PUT_NUMS + ": " + e);
            }
            for (String group : groups.getGroupList()) {
                try {
                    BrokerStatsData get = admin.viewBrokerStatsData(master, Stats.GROUP_GET_NUMS, topic + "@" + group);
                    outTps += get.getStatsMinute().getTps();
                    outToday += StatsAllSubCommand.compute24HourSum(get);
                } catch (Exception e) {
                    errors.add(Stats.GROUP_GET_NUMS + " " + group + ": " + e);
                }
            }
        }
        return map("listed", listed, "groups", sorted(groups.getGroupList()), "inTps", inTps, "inMsgCntToday", inToday,
            "outTps", outTps, "outMsgCntToday", outToday, "errors", errors);
    }

    // -- Topic page (TopicServiceImpl) --------------------------------------------------------------
    private Object topicList() throws Exception {
        return map("topics", sorted(admin.fetchAllTopicList().getTopicList()), "systemTopics",
            sorted(systemTopicProducer().getDefaultMQProducerImpl().getmQClientFactory().getMQClientAPIImpl()
                .getSystemTopicList(20000L).getTopicList()));
    }

    /** The dashboard asks the name server for its system topics through a producer of its own. */
    private DefaultMQProducer systemTopicProducer() throws MQClientException {
        if (systemTopicProducer == null) {
            DefaultMQProducer p = new DefaultMQProducer(MixAll.SELF_TEST_PRODUCER_GROUP, null, false,
                TopicValidator.RMQ_SYS_TRACE_TOPIC);
            p.setInstanceName("SystemTopicProducer-" + System.currentTimeMillis());
            p.setNamesrvAddr(namesrv);
            p.start();
            systemTopicProducer = p;
        }
        return systemTopicProducer;
    }

    private Object topicTypes() throws Exception {
        Set<String> system = systemTopicProducer().getDefaultMQProducerImpl().getmQClientFactory()
            .getMQClientAPIImpl().getSystemTopicList(20000L).getTopicList();
        Map<String, Object> types = new TreeMap<>();
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            TopicConfigSerializeWrapper all = admin.getAllTopicConfig(bd.getBrokerAddrs().get(0L), 10000L);
            for (TopicConfig tc : all.getTopicConfigTable().values()) {
                String name = tc.getTopicName();
                String type;
                if (name.startsWith("%R")) {
                    type = "RETRY";
                } else if (name.startsWith("%D")) {
                    type = "DLQ";
                } else if (system.contains(name) || name.startsWith("rmq_sys")
                    || name.equals("DefaultHeartBeatSyncerTopic")) {
                    type = "SYSTEM";
                } else if (tc.getAttributes() == null || tc.getAttributes().isEmpty()) {
                    type = "UNSPECIFIED";
                } else {
                    String t = tc.getAttributes().get("message.type");
                    type = t == null || t.isBlank() ? "UNSPECIFIED" : t;
                }
                types.put(name, type);
            }
        }
        return types;
    }

    private Object topicStats(String topic) throws Exception {
        TopicStatsTable table = admin.examineTopicStats(topic);
        List<Object> queues = new ArrayList<>();
        List<MessageQueue> mqs = new ArrayList<>(table.getOffsetTable().keySet());
        Collections.sort(mqs);
        for (MessageQueue mq : mqs) {
            TopicOffset o = table.getOffsetTable().get(mq);
            queues.add(map("brokerName", mq.getBrokerName(), "queueId", mq.getQueueId(), "minOffset", o.getMinOffset(),
                "maxOffset", o.getMaxOffset(), "lastUpdateTimestamp", o.getLastUpdateTimestamp()));
        }
        return queues;
    }

    private static Object route(TopicRouteData route) {
        List<Object> queues = new ArrayList<>();
        for (QueueData q : route.getQueueDatas()) {
            queues.add(map("brokerName", q.getBrokerName(), "readQueueNums", q.getReadQueueNums(),
                "writeQueueNums", q.getWriteQueueNums(), "perm", q.getPerm(), "topicSysFlag", q.getTopicSysFlag()));
        }
        List<Object> brokers = new ArrayList<>();
        for (BrokerData b : route.getBrokerDatas()) {
            brokers.add(map("cluster", b.getCluster(), "brokerName", b.getBrokerName(), "brokerAddrs",
                stringKeys(b.getBrokerAddrs())));
        }
        return map("queueDatas", queues, "brokerDatas", brokers);
    }

    /** ConsumerServiceImpl.queryConsumeStatsListByTopicName: the "consumer manage" dialog. */
    private Object topicConsumers(String topic) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (String group : admin.queryTopicConsumeByWho(topic).getGroupList()) {
            try {
                ConsumeStats stats = admin.examineConsumeStats(group, topic);
                out.put(group, map("diffTotal", stats.computeTotalDiff(), "consumeTps", stats.getConsumeTps(),
                    "queues", queueStats(topic, stats, clientOfQueue(group))));
            } catch (Exception e) {
                out.put(group, map("error", error(e))); // the dashboard shows the group with no queues
            }
        }
        return out;
    }

    private Object topicCreateOrUpdate(JSONObject a) throws Exception {
        TopicConfig tc = new TopicConfig(a.getString("topicName"));
        tc.setReadQueueNums(a.getIntValue("readQueueNums"));
        tc.setWriteQueueNums(a.getIntValue("writeQueueNums"));
        tc.setPerm(a.getIntValue("perm"));
        tc.setOrder(a.getBooleanValue("order"));
        String type = a.getString("messageType");
        tc.setAttributes(Map.of("+message.type", type == null || type.isBlank() ? "NORMAL" : type));
        ClusterInfo info = admin.examineBrokerClusterInfo();
        List<String> done = new ArrayList<>();
        for (String brokerName : brokerNames(info, strings(a, "clusterNameList"), strings(a, "brokerNameList"))) {
            admin.createAndUpdateTopicConfig(info.getBrokerAddrTable().get(brokerName).selectBrokerAddr(), tc);
            done.add(brokerName);
        }
        return done;
    }

    private Object topicExamineConfig(String topic) throws Exception {
        List<Object> out = new ArrayList<>();
        ClusterInfo info = admin.examineBrokerClusterInfo();
        for (BrokerData bd : admin.examineTopicRouteInfo(topic).getBrokerDatas()) {
            TopicConfig tc = admin.examineTopicConfig(
                info.getBrokerAddrTable().get(bd.getBrokerName()).selectBrokerAddr(), topic);
            String type = tc.getAttributes() == null ? null : tc.getAttributes().get("message.type");
            out.add(map("brokerName", bd.getBrokerName(), "topicName", tc.getTopicName(),
                "readQueueNums", tc.getReadQueueNums(), "writeQueueNums", tc.getWriteQueueNums(),
                "perm", tc.getPerm(), "order", tc.isOrder(), "topicSysFlag", tc.getTopicSysFlag(),
                "attributes", tc.getAttributes() == null ? Map.of() : new TreeMap<>(tc.getAttributes()),
                "messageType", type == null || type.isBlank() ? "UNSPECIFIED" : type));
        }
        return out;
    }

    private Object topicDelete(String topic, String clusterName) throws Exception {
        List<String> clusters = clusterName == null || clusterName.isBlank()
            ? new ArrayList<>(admin.examineBrokerClusterInfo().getClusterAddrTable().keySet()) : List.of(clusterName);
        for (String cluster : clusters) {
            Set<String> masters = CommandUtil.fetchMasterAddrByClusterName(admin, cluster);
            admin.deleteTopicInBroker(masters, topic);
            admin.deleteTopicInNameServer(new java.util.HashSet<>(List.of(namesrv.split(";"))), topic);
        }
        return clusters;
    }

    /** TopicServiceImpl.sendTopicMessageRequest: the "send message" dialog, a producer of its own. */
    private Object sendMessage(JSONObject a) throws Exception {
        String topic = a.getString("topic");
        boolean trace = a.getBooleanValue("traceEnabled");
        @SuppressWarnings("unchecked")
        String type = (String) ((Map<String, Object>) ((List<?>) topicExamineConfig(topic)).get(0)).get("messageType");
        Message msg = new Message(topic, a.getString("tag"), a.getString("key"),
            a.getString("messageBody").getBytes(StandardCharsets.UTF_8));
        DefaultMQProducer producer;
        if ("TRANSACTION".equals(type)) {
            TransactionMQProducer tp = new TransactionMQProducer(null, MixAll.SELF_TEST_PRODUCER_GROUP, null, trace,
                TopicValidator.RMQ_SYS_TRACE_TOPIC);
            tp.setTransactionListener(new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt m) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
            });
            producer = tp;
        } else {
            producer = new DefaultMQProducer(MixAll.SELF_TEST_PRODUCER_GROUP, null, trace,
                TopicValidator.RMQ_SYS_TRACE_TOPIC);
        }
        producer.setInstanceName(String.valueOf(System.nanoTime()));
        producer.setNamesrvAddr(namesrv);
        producer.start();
        try {
            SendResult r = producer instanceof TransactionMQProducer
                ? ((TransactionMQProducer) producer).sendMessageInTransaction(msg, null) : producer.send(msg);
            return map("messageType", type, "sendStatus", r.getSendStatus().name(), "msgId", r.getMsgId(),
                "offsetMsgId", r.getOffsetMsgId(), "brokerName", r.getMessageQueue().getBrokerName(),
                "queueId", r.getMessageQueue().getQueueId(), "queueOffset", r.getQueueOffset());
        } finally {
            producer.shutdown(); // flushes the trace dispatcher's queue first
        }
    }

    // -- Consumer page (ConsumerServiceImpl) -----------------------------------------------------
    private Object groupList() throws Exception {
        Map<String, List<String>> addresses = new TreeMap<>();
        Map<String, SubscriptionGroupConfig> configs = new TreeMap<>();
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            SubscriptionGroupWrapper w = admin.getAllSubscriptionGroup(bd.selectBrokerAddr(), 30000L);
            for (Map.Entry<String, SubscriptionGroupConfig> e : w.getSubscriptionGroupTable().entrySet()) {
                addresses.computeIfAbsent(e.getKey(), k -> new ArrayList<>()).add(bd.selectBrokerAddr());
                configs.put(e.getKey(), e.getValue());
            }
        }
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, List<String>> e : addresses.entrySet()) {
            String group = e.getKey();
            Map<String, Object> info = map("address", e.getValue(), "subGroupType",
                configs.get(group).isConsumeMessageOrderly() ? "FIFO" : "NORMAL");
            try {
                ConsumeStats stats = admin.examineConsumeStats(group);
                info.put("consumeTps", (int) stats.getConsumeTps());
                info.put("diffTotal", stats.computeTotalDiff());
            } catch (Exception err) {
                info.put("consumeStatsError", error(err)); // the dashboard logs it and shows no lag
            }
            try {
                ConsumerConnection cc = admin.examineConsumerConnectionInfo(group);
                info.put("count", cc.getConnectionSet().size());
                info.put("messageModel", String.valueOf(cc.getMessageModel()));
                info.put("consumeType", String.valueOf(cc.getConsumeType()));
                info.put("version", MQVersion.getVersionDesc(cc.computeMinVersion()));
            } catch (Exception err) {
                info.put("connectionError", error(err)); // offline: the dashboard shows count 0
            }
            out.put(group, info);
        }
        return out;
    }

    private Object topicsOfGroup(String group, String address) throws Exception {
        Map<MessageQueue, String> clients = clientOfQueue(group);
        List<Object> out = new ArrayList<>();
        for (String addr : address.split(",")) {
            ConsumeStats stats = admin.examineConsumeStats(addr, group, null, 3000);
            out.addAll(queueStats(null, stats, clients));
        }
        return out;
    }

    /** ConsumerServiceImpl.getClientConnection: which client holds each queue, from its running info. */
    private Map<MessageQueue, String> clientOfQueue(String group) {
        Map<MessageQueue, String> out = new java.util.HashMap<>();
        try {
            for (Connection c : admin.examineConsumerConnectionInfo(group).getConnectionSet()) {
                ConsumerRunningInfo info = admin.getConsumerRunningInfo(group, c.getClientId(), false);
                for (MessageQueue mq : info.getMqTable().keySet()) {
                    out.put(mq, c.getClientId());
                }
            }
        } catch (Exception e) {
            // the dashboard logs op=getClientConnection_error and shows no client
        }
        return out;
    }

    private static List<Object> queueStats(String topic, ConsumeStats stats, Map<MessageQueue, String> clients) {
        List<MessageQueue> mqs = new ArrayList<>();
        for (MessageQueue mq : stats.getOffsetTable().keySet()) {
            if (topic == null || mq.getTopic().equals(topic)) {
                mqs.add(mq);
            }
        }
        Collections.sort(mqs);
        List<Object> out = new ArrayList<>();
        for (MessageQueue mq : mqs) {
            OffsetWrapper o = stats.getOffsetTable().get(mq);
            out.add(map("topic", mq.getTopic(), "brokerName", mq.getBrokerName(), "queueId", mq.getQueueId(),
                "brokerOffset", o.getBrokerOffset(), "consumerOffset", o.getConsumerOffset(),
                "lastTimestamp", o.getLastTimestamp(), "clientInfo", clients.get(mq)));
        }
        return out;
    }

    private static Object connection(ConsumerConnection cc) {
        List<Object> conns = new ArrayList<>();
        for (Connection c : cc.getConnectionSet()) {
            conns.add(map("clientId", c.getClientId(), "clientAddr", c.getClientAddr(), "language",
                String.valueOf(c.getLanguage()), "version", c.getVersion()));
        }
        Map<String, Object> subs = new TreeMap<>();
        for (Map.Entry<String, SubscriptionData> e : cc.getSubscriptionTable().entrySet()) {
            subs.put(e.getKey(), e.getValue().getSubString());
        }
        return map("connections", conns, "subscriptions", subs, "consumeType", String.valueOf(cc.getConsumeType()),
            "messageModel", String.valueOf(cc.getMessageModel()), "consumeFromWhere",
            String.valueOf(cc.getConsumeFromWhere()));
    }

    private static Object runningInfo(ConsumerRunningInfo info) {
        List<Object> queues = new ArrayList<>();
        for (Map.Entry<MessageQueue, ProcessQueueInfo> e : info.getMqTable().entrySet()) {
            ProcessQueueInfo p = e.getValue();
            queues.add(map("topic", e.getKey().getTopic(), "brokerName", e.getKey().getBrokerName(),
                "queueId", e.getKey().getQueueId(), "commitOffset", p.getCommitOffset(),
                "cachedMsgCount", p.getCachedMsgCount(), "droped", p.isDroped()));
        }
        Map<String, Object> status = new TreeMap<>();
        for (Map.Entry<String, ConsumeStatus> e : info.getStatusTable().entrySet()) {
            status.put(e.getKey(), map("pullTPS", e.getValue().getPullTPS(), "consumeOKTPS",
                e.getValue().getConsumeOKTPS(), "consumeFailedMsgs", e.getValue().getConsumeFailedMsgs()));
        }
        List<String> topics = new ArrayList<>();
        for (SubscriptionData s : info.getSubscriptionSet()) {
            topics.add(s.getTopic());
        }
        Map<String, String> props = new TreeMap<>();
        info.getProperties().forEach((k, v) -> props.put(String.valueOf(k), String.valueOf(v)));
        return map("properties", props, "subscriptions", topics, "mqTable", queues, "statusTable", status,
            "jstack", info.getJstack());
    }

    /** ConsumerServiceImpl.examineSubscriptionGroupConfig: each broker's whole table (the dashboard's
     * own MQAdminExtImpl sends GET_ALL_SUBSCRIPTIONGROUP_CONFIG), the group picked out of it. */
    private Object examineGroupConfig(String group) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, BrokerData> e : admin.examineBrokerClusterInfo().getBrokerAddrTable().entrySet()) {
            SubscriptionGroupConfig c = admin.getAllSubscriptionGroup(e.getValue().selectBrokerAddr(), 8000L)
                .getSubscriptionGroupTable().get(group);
            if (c != null) {
                out.put(e.getKey(), map("groupName", c.getGroupName(), "consumeEnable", c.isConsumeEnable(),
                    "consumeBroadcastEnable", c.isConsumeBroadcastEnable(), "consumeMessageOrderly",
                    c.isConsumeMessageOrderly(), "retryQueueNums", c.getRetryQueueNums(), "retryMaxTimes",
                    c.getRetryMaxTimes(), "brokerId", c.getBrokerId(), "whichBrokerWhenConsumeSlowly",
                    c.getWhichBrokerWhenConsumeSlowly(), "notifyConsumerIdsChangedEnable",
                    c.isNotifyConsumerIdsChangedEnable(), "consumeTimeoutMinute", c.getConsumeTimeoutMinute()));
            }
        }
        return out;
    }

    private Object groupCreateOrUpdate(JSONObject a) throws Exception {
        SubscriptionGroupConfig c = new SubscriptionGroupConfig();
        c.setGroupName(a.getString("groupName"));
        if (a.containsKey("consumeEnable")) {
            c.setConsumeEnable(a.getBooleanValue("consumeEnable"));
        }
        c.setConsumeBroadcastEnable(a.getBooleanValue("consumeBroadcastEnable"));
        c.setConsumeMessageOrderly(a.getBooleanValue("consumeMessageOrderly"));
        if (a.containsKey("retryQueueNums")) {
            c.setRetryQueueNums(a.getIntValue("retryQueueNums"));
        }
        if (a.containsKey("retryMaxTimes")) {
            c.setRetryMaxTimes(a.getIntValue("retryMaxTimes"));
        }
        ClusterInfo info = admin.examineBrokerClusterInfo();
        List<String> done = new ArrayList<>();
        for (String brokerName : brokerNames(info, strings(a, "clusterNameList"), strings(a, "brokerNameList"))) {
            admin.createAndUpdateSubscriptionGroupConfig(info.getBrokerAddrTable().get(brokerName).selectBrokerAddr(), c);
            done.add(brokerName);
        }
        return done;
    }

    /** ConsumerServiceImpl.deleteSubGroup: the group, then its retry and DLQ topics. */
    @SuppressWarnings("unchecked")
    private Object groupDelete(String group, List<String> brokerNames) throws Exception {
        Set<String> hosting = ((Map<String, Object>) examineGroupConfig(group)).keySet();
        boolean inNameServer = brokerNames.containsAll(hosting);
        ClusterInfo info = admin.examineBrokerClusterInfo();
        Set<String> namesrvs = new java.util.HashSet<>(List.of(namesrv.split(";")));
        for (String brokerName : brokerNames) {
            String addr = info.getBrokerAddrTable().get(brokerName).selectBrokerAddr();
            admin.deleteSubscriptionGroup(addr, group, true);
            for (String topic : List.of(MixAll.RETRY_GROUP_TOPIC_PREFIX + group, MixAll.DLQ_GROUP_TOPIC_PREFIX + group)) {
                admin.deleteTopicInBroker(Set.of(addr), topic);
                if (inNameServer) {
                    admin.deleteTopicInNameServer(namesrvs, topic);
                }
            }
        }
        return map("deletedInNameServer", inNameServer);
    }

    /** ConsumerServiceImpl.resetOffset (the Topic page's and the Consumer page's reset). */
    private Object resetOffset(JSONObject a) {
        String topic = a.getString("topic");
        long time = a.getLongValue("resetTime");
        Map<String, Object> out = new TreeMap<>();
        for (String group : strings(a, "consumerGroupList")) {
            try {
                Map<MessageQueue, Long> moved = admin.resetOffsetByTimestamp(topic, group, time, a.getBooleanValue("force"));
                List<Object> stats = new ArrayList<>();
                for (Map.Entry<MessageQueue, Long> e : new TreeMap<>(moved).entrySet()) {
                    stats.add(map("brokerName", e.getKey().getBrokerName(), "queueId", e.getKey().getQueueId(),
                        "rollbackOffset", e.getValue()));
                }
                out.put(group, map("status", true, "path", "resetOffsetByTimestamp", "rollbackStatsList", stats));
            } catch (MQClientException e) {
                if (e.getResponseCode() == ResponseCode.CONSUMER_NOT_ONLINE) {
                    try {
                        List<Object> stats = new ArrayList<>();
                        for (RollbackStats r : admin.resetOffsetByTimestampOld(group, topic, time, true)) {
                            stats.add(map("brokerName", r.getBrokerName(), "queueId", r.getQueueId(), "brokerOffset",
                                r.getBrokerOffset(), "consumerOffset", r.getConsumerOffset(), "rollbackOffset",
                                r.getRollbackOffset()));
                        }
                        out.put(group, map("status", true, "path", "resetOffsetByTimestampOld", "rollbackStatsList", stats));
                        continue;
                    } catch (Exception err) {
                        out.put(group, map("status", false, "errMsg", String.valueOf(err.getMessage())));
                        continue;
                    }
                }
                out.put(group, map("status", false, "errMsg", String.valueOf(e.getMessage())));
            } catch (Exception e) {
                out.put(group, map("status", false, "errMsg", String.valueOf(e.getMessage())));
            }
        }
        return out;
    }

    // -- Producer page (ProducerServiceImpl) -----------------------------------------------------
    private Object producerConnection(String group, String topic) throws Exception {
        ProducerConnection pc = admin.examineProducerConnectionInfo(group, topic);
        List<Object> out = new ArrayList<>();
        for (Connection c : pc.getConnectionSet()) {
            out.add(map("clientId", c.getClientId(), "clientAddr", c.getClientAddr(), "language",
                String.valueOf(c.getLanguage()), "version", c.getVersion()));
        }
        return out;
    }

    // -- Message page (MessageServiceImpl) -------------------------------------------------------
    /** The dashboard's pull consumer (AutoCloseConsumerWrapper): TOOLS_CONSUMER_GROUP, kept started. */
    private DefaultMQPullConsumer toolsConsumer() throws MQClientException {
        if (toolsConsumer == null) {
            DefaultMQPullConsumer c = new DefaultMQPullConsumer(MixAll.TOOLS_CONSUMER_GROUP, null);
            c.setInstanceName(String.valueOf(System.nanoTime()));
            c.setNamesrvAddr(namesrv);
            c.start();
            toolsConsumer = c;
        }
        return toolsConsumer;
    }

    /** MessageServiceImpl.queryMessageByTopic: each queue pulled from searchOffset(begin) to
     * searchOffset(end), 32 at a time, kept when stored within [begin, end]; newest first. */
    private Object byTopic(String topic, long begin, long end) throws Exception {
        DefaultMQPullConsumer consumer = toolsConsumer();
        List<MessageExt> found = new ArrayList<>();
        for (MessageQueue mq : consumer.fetchSubscribeMessageQueues(topic)) {
            long min = consumer.searchOffset(mq, begin);
            long max = consumer.searchOffset(mq, end);
            read:
            for (long offset = min; offset <= max && found.size() <= MESSAGE_PAGE_LIMIT; ) {
                PullResult r = consumer.pull(mq, "*", offset, 32);
                offset = r.getNextBeginOffset();
                switch (r.getPullStatus()) {
                    case FOUND:
                        for (MessageExt m : r.getMsgFoundList()) {
                            if (m.getStoreTimestamp() >= begin && m.getStoreTimestamp() <= end) {
                                found.add(m);
                            }
                        }
                        break;
                    default:
                        break read;
                }
            }
        }
        found.sort((x, y) -> Long.compare(y.getStoreTimestamp(), x.getStoreTimestamp()));
        List<Object> out = new ArrayList<>();
        for (MessageExt m : found) {
            out.add(view(m, false));
        }
        return out;
    }

    private Object byKey(String topic, String key) throws Exception {
        QueryResult r = admin.queryMessage(topic, key, QUERY_MESSAGE_MAX_NUM, 0, System.currentTimeMillis());
        List<Object> out = new ArrayList<>();
        for (MessageExt m : r.getMessageList()) {
            out.add(view(m, false));
        }
        return out;
    }

    /** MessageServiceImpl.viewMessage: the dashboard's MQAdminExtImpl looks the id up as a unique key
     * in each cluster of the topic (queryMessageByUniqKey), then messageTrackDetail. */
    private Object viewMessage(String topic, String msgId) throws Exception {
        MessageExt msg = findByUniqKey(topic, msgId);
        if (msg == null) {
            return null;
        }
        List<Object> tracks = new ArrayList<>();
        for (MessageTrack t : admin.messageTrackDetail(msg)) {
            tracks.add(map("consumerGroup", t.getConsumerGroup(), "trackType", String.valueOf(t.getTrackType()),
                "exceptionDesc", t.getExceptionDesc()));
        }
        return map("message", view(msg, true), "tracks", tracks);
    }

    private MessageExt findByUniqKey(String topic, String msgId) throws Exception {
        Set<String> clusters = admin.getTopicClusterList(topic);
        for (String cluster : clusters.isEmpty() ? Set.of("") : clusters) {
            QueryResult r = admin.queryMessageByUniqKey(cluster, topic, msgId, 32, 0L, Long.MAX_VALUE);
            if (r != null && r.getMessageList() != null && !r.getMessageList().isEmpty()) {
                return r.getMessageList().get(0);
            }
        }
        return null;
    }

    /** MessageServiceImpl.consumeMessageDirectly: to the given client, else the group's first one. */
    private ConsumeMessageDirectlyResult consumeDirectly(String topic, String msgId, String group, String clientId)
        throws Exception {
        if (clientId != null && !clientId.isBlank()) {
            return admin.consumeMessageDirectly(group, clientId, topic, msgId);
        }
        for (Connection c : admin.examineConsumerConnectionInfo(group).getConnectionSet()) {
            if (c.getClientId() != null && !c.getClientId().isBlank()) {
                return admin.consumeMessageDirectly(group, c.getClientId(), topic, msgId);
            }
        }
        throw new IllegalStateException("NO CONSUMER");
    }

    private static Map<String, Object> directResult(ConsumeMessageDirectlyResult r) {
        return map("order", r.isOrder(), "autoCommit", r.isAutoCommit(), "consumeResult",
            String.valueOf(r.getConsumeResult()), "remark", r.getRemark(), "spentTimeMills", r.getSpentTimeMills());
    }

    // -- Message trace page (MessageTraceServiceImpl) ------------------------------------------------
    private Object traceQuery(String topic, String msgId) throws Exception {
        String traceTopic = topic == null || topic.isBlank() ? TopicValidator.RMQ_SYS_TRACE_TOPIC : topic;
        List<Object> out = new ArrayList<>();
        QueryResult r = admin.queryMessage(traceTopic, msgId, QUERY_MESSAGE_MAX_NUM, 0, System.currentTimeMillis());
        for (MessageExt m : r.getMessageList()) {
            for (TraceContext ctx : TraceDataEncoder.decoderFromTraceDataString(
                new String(m.getBody(), StandardCharsets.UTF_8))) {
                for (TraceBean b : ctx.getTraceBeans()) {
                    if (!msgId.equals(b.getMsgId())) {
                        continue; // MessageTraceView.decodeFromTraceTransData keeps the asked id only
                    }
                    out.add(map("traceType", String.valueOf(ctx.getTraceType()), "groupName", ctx.getGroupName(),
                        "success", ctx.isSuccess(), "costTime", ctx.getCostTime(), "topic", b.getTopic(),
                        "msgId", msgId, "offsetMsgId", b.getOffsetMsgId(), "tags", b.getTags(), "keys", b.getKeys(),
                        "storeHost", b.getStoreHost(), "clientHost", b.getClientHost(), "retryTimes",
                        b.getRetryTimes(), "bodyLength", b.getBodyLength(), "msgType", String.valueOf(b.getMsgType())));
                }
            }
        }
        return out;
    }

    // -- DLQ page (DlqMessageServiceImpl) -------------------------------------------------------------
    private Object dlqQuery(String group, long begin, long end) throws Exception {
        String topic = MixAll.DLQ_GROUP_TOPIC_PREFIX + group;
        try {
            admin.examineTopicRouteInfo(topic);
        } catch (MQClientException e) {
            if (e.getResponseCode() == ResponseCode.TOPIC_NOT_EXIST) {
                return List.of(); // no DLQ yet: an empty page
            }
            throw e;
        }
        return byTopic(topic, begin, end);
    }

    private Object batchResend(JSONArray messages) throws Exception {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < messages.size(); i++) {
            JSONObject m = messages.getJSONObject(i);
            ConsumeMessageDirectlyResult r = consumeDirectly(m.getString("topicName"), m.getString("msgId"),
                m.getString("consumerGroup"), m.getString("clientId"));
            Map<String, Object> one = directResult(r);
            one.put("msgId", m.getString("msgId"));
            out.add(one);
        }
        return out;
    }

    // -- helpers ------------------------------------------------------------------------------------
    private static Map<String, Object> view(MessageExt m, boolean withBody) {
        Map<String, Object> v = map("topic", m.getTopic(), "msgId", m.getMsgId(), "tags", m.getTags(), "keys",
            m.getKeys(), "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(), "storeTimestamp",
            m.getStoreTimestamp(), "bornTimestamp", m.getBornTimestamp(), "reconsumeTimes", m.getReconsumeTimes(),
            "properties", new TreeMap<>(m.getProperties()));
        if (withBody && m.getBody() != null) {
            v.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        }
        return v;
    }

    /** The dashboard's changeToBrokerNameSet: the brokers of the named clusters, plus the named brokers. */
    static Set<String> brokerNames(ClusterInfo info, List<String> clusters, List<String> brokers) {
        Set<String> out = new LinkedHashSet<>();
        for (String c : clusters) {
            Set<String> names = info.getClusterAddrTable().get(c);
            if (names != null) {
                out.addAll(names);
            }
        }
        out.addAll(brokers);
        return out;
    }

    static List<String> strings(JSONObject a, String key) {
        JSONArray arr = a.getJSONArray(key);
        return arr == null ? List.of() : arr.toJavaList(String.class);
    }

    private static List<String> sorted(Set<String> s) {
        List<String> out = new ArrayList<>(s);
        Collections.sort(out);
        return out;
    }

    private static Map<String, String> stringKeys(Map<Long, String> m) {
        Map<String, String> out = new TreeMap<>();
        m.forEach((k, v) -> out.put(k.toString(), v));
        return out;
    }

    /** An exception as the test wants it: class, message, causes, and the response code if any. */
    private static Map<String, Object> error(Throwable t) {
        List<String> causes = new ArrayList<>();
        Map<String, Object> r = map("class", t.getClass().getName(), "message", String.valueOf(t.getMessage()),
            "causes", causes);
        for (Throwable c = t.getCause(); c != null && causes.size() < 6; c = c.getCause()) {
            causes.add(c.getClass().getName() + ": " + c.getMessage());
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof MQBrokerException) {
                r.put("responseCode", ((MQBrokerException) c).getResponseCode());
                r.put("remark", ((MQBrokerException) c).getErrorMessage());
                break;
            }
            if (c instanceof MQClientException && ((MQClientException) c).getResponseCode() > 0) {
                r.put("responseCode", ((MQClientException) c).getResponseCode());
                r.put("remark", ((MQClientException) c).getErrorMessage());
                break;
            }
        }
        return r;
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static void emit(Map<String, Object> m) {
        synchronized (STDOUT) {
            STDOUT.println(JSON.toJSONString(m, com.alibaba.fastjson.serializer.SerializerFeature.WriteMapNullValue));
            STDOUT.flush();
        }
    }
}
