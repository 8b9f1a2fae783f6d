package rocketlite.peers;

import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.trace.TraceBean;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Scenarios of the RocketMQ 4.9.8 Java client (rocketmq-client + rocketmq-acl) against a name
 * server, one per JVM: {@code Scenarios <scenario> <namesrv> key=value...}. Each prints JSON
 * lines (sent, send_error, recv, check, trace, wait, done; fatal on an exception) and exits; the
 * pytest module tests/peers/java/test_java4.py asserts on those lines and on the broker's state.
 * A scenario that needs the test to act in between (kill a name server, look at the broker)
 * prints {"event":"wait"} and reads a line from stdin. Any scenario takes {@code tls=true} (the
 * producers and push consumers call setUseTLS).
 */
public final class Scenarios {
    private final String namesrv;
    private final Map<String, String> args;
    private final long deadline;

    private Scenarios(String namesrv, Map<String, String> args) {
        this.namesrv = namesrv;
        this.args = args;
        this.deadline = Out.deadline(args);
    }

    public static void main(String[] argv) {
        Out.runAndExit(() -> {
            new Scenarios(argv[1], Out.args(argv, 2)).run(argv[0]);
            return null;
        });
    }

    private void run(String scenario) throws Exception {
        switch (scenario) {
            case "produce": produce(); break;
            case "batch": batch(); break;
            case "compressed": compressed(); break;
            case "ordered": ordered(); break;
            case "delay": delay(); break;
            case "transaction": transaction(); break;
            case "push": push(); break;
            case "broadcast": broadcast(); break;
            case "lite_pull_assign": litePullAssign(); break;
            case "lite_pull_subscribe": litePullSubscribe(); break;
            case "tags": selector(args.get("expression"), null); break;
            case "sql92": selector(null, args.get("sql")); break;
            case "retry_dlq": retryDlq(); break;
            case "timestamp": timestamp(); break;
            case "trace": trace(); break;
            case "acl": acl(); break;
            case "failover": failover(); break;
            case "request_reply": requestReply(); break;
            default: throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    // -- producers ---------------------------------------------------------------------------------

    /** n messages sent `mode` = sync, async or oneway (tags = the mode, keys = mode-i, property seq=i). */
    private void produce() throws Exception {
        String topic = args.get("topic");
        String mode = args.get("mode");
        int n = intArg("n", 4);
        DefaultMQProducer p = producer(args.get("group"), null, "DEFAULT");
        CountDownLatch callbacks = new CountDownLatch("async".equals(mode) ? n : 0);
        for (int i = 0; i < n; i++) {
            final int seq = i;
            Message m = message(topic, mode, i);
            switch (mode) {
                case "sync":
                    sent(mode, i, p.send(m));
                    break;
                case "async":
                    p.send(m, new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            sent(mode, seq, r);
                            callbacks.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            Out.emit("send_error", "mode", mode, "i", seq, "error", Out.error(e));
                            callbacks.countDown();
                        }
                    });
                    break;
                case "oneway":
                    p.sendOneway(m);
                    Out.emit("sent", "mode", mode, "i", i, "msgId", MessageClientIDSetter.getUniqID(m));
                    break;
                default:
                    throw new IllegalArgumentException("mode " + mode);
            }
        }
        await(callbacks, "async send callbacks");
        p.shutdown();
    }

    /** One batch of n messages: one request, consecutive offsets of one queue. */
    private void batch() throws Exception {
        String topic = args.get("topic");
        int n = intArg("n", 8);
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(message(topic, "batch", i));
        }
        DefaultMQProducer p = producer(args.get("group"), null, "DEFAULT");
        sent("batch", 0, p.send(batch));
        p.shutdown();
    }

    /** Bodies above compressMsgBodyOverHowmuch (4 KiB) are sent zlib-compressed; read back whole. */
    private void compressed() throws Exception {
        String topic = args.get("topic");
        // Read when the producer is made (MixAll.MESSAGE_COMPRESS_TYPE): ZLIB (default), LZ4 or ZSTD.
        System.setProperty("rocketmq.message.compressType", args.getOrDefault("compressType", "ZLIB"));
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        p.setCompressMsgBodyOverHowmuch(4096);
        int[] sizes = {16384, 1024};
        for (int size : sizes) {
            StringBuilder sb = new StringBuilder();
            for (int line = 0; sb.length() < size; line++) {
                sb.append("line ").append(line).append(" of a body that compresses well\n");
            }
            byte[] body = sb.substring(0, size).getBytes(StandardCharsets.UTF_8);
            Message m = new Message(topic, "Z", "size-" + size, body);
            SendResult r = p.send(m);
            Out.emit("sent", "size", size, "bodySha256", Out.sha256(body), "msgId", r.getMsgId(),
                "offsetMsgId", r.getOffsetMsgId(), "queueId", r.getMessageQueue().getQueueId(),
                "queueOffset", r.getQueueOffset());
        }
        p.shutdown();
        consumeConcurrently(args.get("group"), topic, "*", sizes.length);
    }

    /** Orders spread over the queues by a MessageQueueSelector, then consumed orderly. */
    private void ordered() throws Exception {
        String topic = args.get("topic");
        int orders = intArg("orders", 4);
        int steps = intArg("steps", 5);
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        for (int step = 0; step < steps; step++) {
            for (int order = 0; order < orders; order++) {
                Message m = new Message(topic, "O", "order-" + order,
                    ("o" + order + "-s" + step).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("order", Integer.toString(order));
                m.putUserProperty("step", Integer.toString(step));
                SendResult r = p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                Out.emit("sent", "order", order, "step", step, "msgId", r.getMsgId(),
                    "queueId", r.getMessageQueue().getQueueId(), "queueOffset", r.getQueueOffset());
            }
        }
        p.shutdown();
        DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", null, "DEFAULT");
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(orders * steps);
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "message", Received.message(m), "thread", Thread.currentThread().getName());
                if (seen.add(m.getMsgId())) {
                    all.countDown();
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        await(all, "all ordered messages");
        Out.await("locks checked"); // the test looks at the broker's queue locks now
        c.shutdown();
    }

    /** A message with a delay level, and one without; the delayed one arrives later. */
    private void delay() throws Exception {
        String topic = args.get("topic");
        int level = intArg("level", 2);
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        Message delayed = new Message(topic, "D", "delayed", "delayed".getBytes(StandardCharsets.UTF_8));
        delayed.setDelayTimeLevel(level);
        long sentAt = System.currentTimeMillis();
        SendResult r = p.send(delayed);
        Out.emit("sent", "body", "delayed", "sentAt", sentAt, "msgId", r.getMsgId(), "status", r.getSendStatus().name());
        r = p.send(new Message(topic, "N", "now", "now".getBytes(StandardCharsets.UTF_8)));
        Out.emit("sent", "body", "now", "msgId", r.getMsgId(), "status", r.getSendStatus().name());
        p.shutdown();
        consumeConcurrently(args.get("group"), topic, "*", 2);
    }

    /** Half messages ended COMMIT, ROLLBACK and UNKNOW; the broker checks the UNKNOW one back. */
    private void transaction() throws Exception {
        String topic = args.get("topic");
        TransactionMQProducer p = new TransactionMQProducer(args.get("group") + "_tx");
        p.setNamesrvAddr(namesrv);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return stateFor(new String(msg.getBody(), StandardCharsets.UTF_8));
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Out.emit("check", "message", Received.message(msg), "transactionId", msg.getTransactionId());
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        for (String body : new String[] {"commit", "rollback", "unknown"}) {
            Message m = new Message(topic, "T", "tx-" + body, body.getBytes(StandardCharsets.UTF_8));
            SendResult r = p.sendMessageInTransaction(m, null);
            Out.emit("sent", "body", body, "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
                "transactionId", r.getTransactionId(), "offsetMsgId", r.getOffsetMsgId(),
                "localState", stateFor(body).name());
        }
        consumeConcurrently(args.get("group"), topic, "*", 2);
        p.shutdown();
    }

    private static LocalTransactionState stateFor(String body) {
        switch (body) {
            case "commit": return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback": return LocalTransactionState.ROLLBACK_MESSAGE;
            default: return LocalTransactionState.UNKNOW;
        }
    }

    // -- consumers ---------------------------------------------------------------------------------

    /** A push consumer (concurrently) started first, then n messages; offsets persisted at shutdown. */
    private void push() throws Exception {
        String topic = args.get("topic");
        int n = intArg("n", 16);
        DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", null, "DEFAULT");
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(n);
        c.registerMessageListener(concurrently(seen, all, m -> false));
        c.start();
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        for (int i = 0; i < n; i++) {
            sent("push", i, p.send(message(topic, "push", i)));
        }
        await(all, n + " messages");
        c.shutdown(); // persists the offsets on the broker
        Out.emit("shutdown");
        p.shutdown();
    }

    /** Two BROADCASTING consumers of one group: each gets every message. */
    private void broadcast() throws Exception {
        String topic = args.get("topic");
        int n = intArg("n", 8);
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        CountDownLatch all = new CountDownLatch(2 * n);
        for (String name : new String[] {"b1", "b2"}) {
            DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", null, name);
            c.setMessageModel(MessageModel.BROADCASTING);
            Set<String> seen = ConcurrentHashMap.newKeySet();
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    Out.emit("recv", "consumer", name, "message", Received.message(m));
                    if (seen.add(m.getMsgId())) {
                        all.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            consumers.add(c);
        }
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        for (int i = 0; i < n; i++) {
            sent("broadcast", i, p.send(message(topic, "broadcast", i)));
        }
        await(all, "every message at both consumers");
        for (DefaultMQPushConsumer c : consumers) {
            c.shutdown();
        }
        p.shutdown();
    }

    /** DefaultLitePullConsumer.assign over every queue, seek to 0, poll, commitSync. */
    private void litePullAssign() throws Exception {
        String topic = args.get("topic");
        int n = intArg("n", 8);
        produceN(topic, "assign", n);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(args.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setAutoCommit(false);
        c.start();
        Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
        Out.emit("queues", "count", mqs.size());
        c.assign(mqs);
        for (MessageQueue mq : mqs) {
            c.seek(mq, 0);
        }
        poll(c, n);
        c.commitSync();
        c.shutdown(); // persists the committed offsets on the broker
        Out.emit("shutdown");
    }

    /** DefaultLitePullConsumer.subscribe from the first offset, auto commit. */
    private void litePullSubscribe() throws Exception {
        String topic = args.get("topic");
        int n = intArg("n", 8);
        produceN(topic, "subscribe", n);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(args.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.start();
        poll(c, n);
        c.commitSync(); // auto commit happens in poll(), every autoCommitIntervalMillis (5 s)
        c.shutdown();
        Out.emit("shutdown");
    }

    private void poll(DefaultLitePullConsumer c, int n) throws Exception {
        Set<String> seen = new HashSet<>();
        while (seen.size() < n) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("polled " + seen.size() + " of " + n + " messages");
            }
            for (MessageExt m : c.poll(1000)) {
                Out.emit("recv", "message", Received.message(m));
                seen.add(m.getMsgId());
            }
        }
    }

    /**
     * A tag expression or an SQL92 selector on a one-queue topic, one consume thread: the messages
     * are sent in order, and the last one (which matches) arrives after every earlier match.
     */
    private void selector(String expression, String sql) throws Exception {
        String topic = args.get("topic");
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeThreadMin(1);
        c.setConsumeThreadMax(1);
        if (sql != null) {
            c.subscribe(topic, MessageSelector.bySql(sql));
        } else {
            c.subscribe(topic, expression);
        }
        CountDownLatch last = new CountDownLatch(1);
        c.registerMessageListener(concurrently(ConcurrentHashMap.newKeySet(), new CountDownLatch(0),
            m -> {
                if ("last".equals(m.getKeys())) {
                    last.countDown();
                }
                return false;
            }));
        c.start();
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        // spec: tag:a,tag:a,... ; the last entry gets the key "last"
        String[] spec = args.get("messages").split(",");
        for (int i = 0; i < spec.length; i++) {
            String[] tagAndA = spec[i].split(":");
            Message m = new Message(topic, tagAndA[0], i == spec.length - 1 ? "last" : "k" + i,
                ("m" + i).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("a", tagAndA[1]);
            SendResult r = p.send(m);
            Out.emit("sent", "i", i, "tags", tagAndA[0], "a", tagAndA[1], "msgId", r.getMsgId());
        }
        await(last, "the last matching message");
        c.shutdown();
        p.shutdown();
    }

    /** A message that always fails is retried maxReconsumeTimes times, then goes to the DLQ. */
    private void retryDlq() throws Exception {
        String topic = args.get("topic");
        int max = intArg("max", 2);
        DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", null, "DEFAULT");
        c.setMaxReconsumeTimes(max);
        CountDownLatch deliveries = new CountDownLatch(max + 1 + 2);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "message", Received.message(m));
                deliveries.countDown();
                if ("poison".equals(m.getKeys())) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        for (String key : new String[] {"ok-1", "poison", "ok-2"}) {
            SendResult r = p.send(new Message(topic, "R", key, key.getBytes(StandardCharsets.UTF_8)));
            Out.emit("sent", "key", key, "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId());
        }
        await(deliveries, "the retries");
        Out.await("dead letter"); // the test waits for the DLQ; a further delivery would show up now
        c.shutdown();
        p.shutdown();
    }

    /**
     * "old" messages, then "new" ones from the next whole second on. A push consumer of a new group
     * with CONSUME_FROM_TIMESTAMP; then a lite pull consumer that seeks to offsetForTimestamp.
     */
    private void timestamp() throws Exception {
        String topic = args.get("topic");
        int n = intArg("n", 3);
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        for (int i = 0; i < n; i++) {
            sent("old", i, p.send(message(topic, "old", i)));
        }
        // The consumer takes a timestamp in whole seconds: start the "new" messages on the next one.
        long from = (System.currentTimeMillis() / 1000 + 1) * 1000;
        while (System.currentTimeMillis() < from) {
            Thread.sleep(Math.max(1, from - System.currentTimeMillis()));
        }
        Out.emit("from", "timestamp", from, "text", UtilAll.timeMillisToHumanString3(from));
        for (int i = 0; i < n; i++) {
            sent("new", i, p.send(message(topic, "new", i)));
        }
        p.shutdown();

        DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", null, "DEFAULT");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
        c.setConsumeTimestamp(UtilAll.timeMillisToHumanString3(from));
        int expected = intArg("pushExpects", n);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(expected);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "phase", "push", "message", Received.message(m));
                if (seen.add(m.getMsgId())) {
                    all.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        await(all, expected + " messages (push)");
        c.shutdown();

        DefaultLitePullConsumer lite = new DefaultLitePullConsumer(args.get("group") + "_lite");
        lite.setNamesrvAddr(namesrv);
        lite.setAutoCommit(false);
        lite.start();
        Collection<MessageQueue> mqs = lite.fetchMessageQueues(topic);
        lite.assign(mqs);
        for (MessageQueue mq : mqs) {
            long offset = lite.offsetForTimestamp(mq, from);
            Out.emit("offsetForTimestamp", "queueId", mq.getQueueId(), "offset", offset);
            lite.seek(mq, offset);
        }
        Set<String> polled = new HashSet<>();
        while (polled.size() < n) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("polled " + polled.size() + " of " + n + " new messages");
            }
            for (MessageExt m : lite.poll(1000)) {
                Out.emit("recv", "phase", "lite", "message", Received.message(m));
                polled.add(m.getMsgId());
            }
        }
        lite.shutdown();
    }

    // -- trace, ACL, name servers, request-reply -------------------------------------------------------

    /** enableMsgTrace on both sides; the trace is then read back by message id and by key. */
    private void trace() throws Exception {
        String topic = args.get("topic");
        String key = args.get("key");
        DefaultMQProducer p = new DefaultMQProducer(args.get("group") + "_p", true);
        p.setNamesrvAddr(namesrv);
        p.start();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args.get("group"), true);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        CountDownLatch got = new CountDownLatch(1);
        c.registerMessageListener(concurrently(ConcurrentHashMap.newKeySet(), got, m -> false));
        c.start();
        SendResult r = p.send(new Message(topic, "TraceTag", key, "traced".getBytes(StandardCharsets.UTF_8)));
        Out.emit("sent", "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId(), "status", r.getSendStatus().name());
        await(got, "the traced message");
        String traceTopic = TopicValidator.RMQ_SYS_TRACE_TOPIC;
        // Trace records are sent asynchronously, in batches: query until Pub, SubBefore and SubAfter are there.
        readTrace(p, traceTopic, r.getMsgId(), "id", r.getMsgId());
        readTrace(p, traceTopic, key, "key", r.getMsgId());
        c.shutdown();
        p.shutdown();
    }

    private void readTrace(DefaultMQProducer p, String traceTopic, String queryKey, String by, String msgId)
        throws Exception {
        Set<String> types = new HashSet<>();
        while (!types.containsAll(List.of("Pub", "SubBefore", "SubAfter"))) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("trace by " + by + " " + queryKey + " has only " + types);
            }
            types.clear();
            List<Map<String, Object>> rows = new ArrayList<>();
            try {
                QueryResult qr = p.queryMessage(traceTopic, queryKey, 64, 0, System.currentTimeMillis() + 60_000);
                for (MessageExt m : qr.getMessageList()) {
                    for (TraceContext ctx : TraceDataEncoder.decoderFromTraceDataString(
                        new String(m.getBody(), StandardCharsets.UTF_8))) {
                        for (TraceBean b : ctx.getTraceBeans()) {
                            if (msgId.equals(b.getMsgId())) {
                                types.add(ctx.getTraceType().name());
                                rows.add(Map.of("type", ctx.getTraceType().name(), "group", ctx.getGroupName(),
                                    "success", ctx.isSuccess(), "topic", String.valueOf(b.getTopic()),
                                    "keys", String.valueOf(b.getKeys()), "storeHost", String.valueOf(b.getStoreHost()),
                                    "traceMsgKeys", String.valueOf(m.getKeys())));
                            }
                        }
                    }
                }
            } catch (Exception e) {
                rows.clear(); // "no message" until the trace producer flushed
            }
            if (types.containsAll(List.of("Pub", "SubBefore", "SubAfter"))) {
                for (Map<String, Object> row : rows) {
                    Out.emit("trace", "by", by, "record", row);
                }
            } else {
                Thread.sleep(200);
            }
        }
    }

    /** AclClientRPCHook: the right keys send and consume; a wrong secret and a denied topic are refused. */
    private void acl() throws Exception {
        String topic = args.get("topic");
        RPCHook good = new AclClientRPCHook(new SessionCredentials(args.get("ak"), args.get("sk")));
        RPCHook bad = new AclClientRPCHook(new SessionCredentials(args.get("ak"), args.get("sk") + "-wrong"));
        DefaultMQProducer p = producer(args.get("group") + "_p", good, "acl-good");
        for (int i = 0; i < 2; i++) {
            sent("acl", i, p.send(message(topic, "acl", i)));
        }
        tryToSend(p, args.get("deniedTopic"), "denied-topic");
        DefaultMQProducer wrong = producer(args.get("group") + "_w", bad, "acl-bad");
        tryToSend(wrong, topic, "wrong-secret");
        wrong.shutdown();
        DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", good, "acl-good");
        CountDownLatch got = new CountDownLatch(2);
        c.registerMessageListener(concurrently(ConcurrentHashMap.newKeySet(), got, m -> false));
        c.start();
        await(got, "the two messages");
        c.shutdown();
        p.shutdown();
    }

    private void tryToSend(DefaultMQProducer p, String topic, String what) {
        try {
            SendResult r = p.send(message(topic, what, 0));
            Out.emit("sent", "mode", what, "status", r.getSendStatus().name(), "msgId", r.getMsgId());
        } catch (Exception e) {
            Out.emit("send_error", "mode", what, "error", Out.error(e));
        }
    }

    /** Two name servers; the test kills the one the client uses; new routes come from the other. */
    private void failover() throws Exception {
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        sent("before", 0, p.send(message(args.get("topic1"), "before", 0)));
        Out.emit("namesrv", "chosen", chosenNamesrv(p));
        Out.await("the chosen name server killed");
        // A route never asked before. The first request may still go out on the dead connection if the
        // client has not seen it close yet (the client then drops it): a user would send again.
        for (int attempt = 1; ; attempt++) {
            try {
                sent("after", attempt, p.send(message(args.get("topic2"), "after", 0)));
                break;
            } catch (IllegalStateException e) {
                Out.emit("send_error", "mode", "after", "i", attempt, "error", Out.error(e));
                if (attempt == 3) {
                    throw e;
                }
            }
        }
        Out.emit("namesrv", "chosen", chosenNamesrv(p));
        p.shutdown();
        consumeConcurrently(args.get("group"), args.get("topic2"), "*", 1);
    }

    /** The name server address the client's remoting layer talks to (NettyRemotingClient keeps it private). */
    private static String chosenNamesrv(DefaultMQProducer p) throws Exception {
        Object remoting = p.getDefaultMQProducerImpl().getmQClientFactory().getMQClientAPIImpl().getRemotingClient();
        Field f = remoting.getClass().getDeclaredField("namesrvAddrChoosed");
        f.setAccessible(true);
        return ((AtomicReference<?>) f.get(remoting)).get().toString();
    }

    /** DefaultMQProducer.request(): a responder consumer answers with MessageUtil.createReplyMessage. */
    private void requestReply() throws Exception {
        String topic = args.get("topic");
        DefaultMQProducer responder = producer(args.get("group") + "_r", null, "responder");
        DefaultMQPushConsumer c = pushConsumer(args.get("group"), topic, "*", null, "responder");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "message", Received.message(m));
                try {
                    Message reply = MessageUtil.createReplyMessage(m, ("re: " + new String(m.getBody(),
                        StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                    SendResult r = responder.send(reply);
                    Out.emit("replied", "status", r.getSendStatus().name(), "topic", reply.getTopic());
                } catch (Exception e) {
                    Out.emit("reply_error", "error", Out.error(e));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer requester = producer(args.get("group") + "_q", null, "requester");
        for (int i = 0; i < 2; i++) {
            Message reply = requester.request(new Message(topic, "Q", "q" + i,
                ("question " + i).getBytes(StandardCharsets.UTF_8)), 10_000);
            Out.emit("reply", "i", i, "body", new String(reply.getBody(), StandardCharsets.UTF_8),
                "topic", reply.getTopic());
        }
        requester.shutdown();
        c.shutdown();
        responder.shutdown();
    }

    // -- helpers -------------------------------------------------------------------------------------

    private DefaultMQProducer producer(String group, RPCHook hook, String instance) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group, hook);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instance); // one client instance (and so one RPC hook) per name
        p.setUseTLS(useTls()); // name server and broker connections alike
        p.start();
        return p;
    }

    private DefaultMQPushConsumer pushConsumer(String group, String topic, String expr, RPCHook hook,
        String instance) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook,
            new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance);
        c.setUseTLS(useTls());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        // shutdown() waits for the listener calls in flight, so their offsets are persisted too
        c.setAwaitTerminationMillisWhenShutdown(10_000);
        c.subscribe(topic, expr);
        return c;
    }

    /** Starts a consumer, waits for `count` distinct messages, stops it. */
    private void consumeConcurrently(String group, String topic, String expr, int count) throws Exception {
        DefaultMQPushConsumer c = pushConsumer(group, topic, expr, null, "DEFAULT");
        CountDownLatch all = new CountDownLatch(count);
        c.registerMessageListener(concurrently(ConcurrentHashMap.newKeySet(), all, m -> false));
        c.start();
        await(all, count + " messages");
        c.shutdown();
    }

    /** Emits every delivery; counts distinct ids down `latch`; `retry` says which to RECONSUME_LATER. */
    private static MessageListenerConcurrently concurrently(Set<String> seen, CountDownLatch latch,
        Predicate<MessageExt> retry) {
        return (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "message", Received.message(m));
                if (retry.test(m)) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                if (seen.add(m.getMsgId())) {
                    latch.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        };
    }

    private void produceN(String topic, String mode, int n) throws Exception {
        DefaultMQProducer p = producer(args.get("group") + "_p", null, "DEFAULT");
        for (int i = 0; i < n; i++) {
            sent(mode, i, p.send(message(topic, mode, i)));
        }
        p.shutdown();
    }

    private static Message message(String topic, String mode, int i) {
        Message m = new Message(topic, mode, mode + "-" + i, (mode + " " + i).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("seq", Integer.toString(i));
        return m;
    }

    private static void sent(String mode, int i, SendResult r) {
        Out.emit("sent", "mode", mode, "i", i, "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
            "offsetMsgId", r.getOffsetMsgId(), "queueId", r.getMessageQueue().getQueueId(),
            "brokerName", r.getMessageQueue().getBrokerName(), "queueOffset", r.getQueueOffset());
    }

    private void await(CountDownLatch latch, String what) throws InterruptedException {
        long left = deadline - System.currentTimeMillis();
        if (!latch.await(Math.max(0, left), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("timed out waiting for " + what + " (" + latch.getCount() + " missing)");
        }
    }

    /**
     * {@code tls=true}: the clients connect with TLS ({@code setUseTLS}); otherwise the JVM's
     * {@code tls.enable} property decides, as ClientConfig's default does. How the server is
     * trusted and which certificate is sent come from the other {@code tls.*} properties.
     */
    private boolean useTls() {
        return Boolean.parseBoolean(args.getOrDefault("tls", System.getProperty("tls.enable", "false")));
    }

    private int intArg(String key, int def) {
        return Integer.parseInt(args.getOrDefault(key, Integer.toString(def)));
    }
}
