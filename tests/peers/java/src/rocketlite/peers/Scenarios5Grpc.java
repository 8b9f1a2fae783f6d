package rocketlite.peers;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;
import org.apache.rocketmq.client.java.message.MessageViewImpl;

/**
 * Scenarios of the RocketMQ 5.x gRPC client (org.apache.rocketmq:rocketmq-client-java 5.2.0)
 * against rocketlite's gRPC endpoint: {@code Scenarios5Grpc <scenario> <endpoint> key=value...},
 * one JSON line per step (see {@link Out}).
 *
 * <p>Arguments every scenario takes: {@code tls=true} (the client's default is TLS; off unless
 * asked), {@code ak=} / {@code sk=} session credentials, {@code namespace=}, {@code catch=true}
 * (a failure is a "failed" line and the driver still ends with "done", for tests that expect one).
 *
 * <ul>
 *   <li>normal: n NORMAL messages (body prefix-i, prefix "java5" by default; tag TagA, keys
 *       key-i, property color=red); with consume=true a SimpleConsumer then receives them.</li>
 *   <li>fifo: n FIFO messages over three message groups, then a SimpleConsumer of a FIFO group
 *       receives them all, acking each batch.</li>
 *   <li>delay: a DELAY message due in delayMs and a NORMAL one after it, both received.</li>
 *   <li>transaction: three transactions (committed, rolled back, left open for the check), the
 *       checker commits every body but "rollback-*"; then the visible ones are received.</li>
 *   <li>simple: a SimpleConsumer (TagA) receives two messages, acks one, shortens the other's
 *       invisible time to 2 s, receives it again, acks it, and receives nothing more.</li>
 *   <li>push: a PushConsumer whose listener fails every body starting with "fail"; it runs until
 *       the test writes a line.</li>
 *   <li>missing: a producer started with a topic that does not exist, then a send to it.</li>
 * </ul>
 */
public final class Scenarios5Grpc {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private final String endpoint;
    private final Map<String, String> args;
    private final long deadline;

    private Scenarios5Grpc(String endpoint, Map<String, String> args) {
        this.endpoint = endpoint;
        this.args = args;
        this.deadline = Out.deadline(args);
    }

    public static void main(String[] argv) {
        Out.runAndExit(() -> {
            Scenarios5Grpc s = new Scenarios5Grpc(argv[1], Out.args(argv, 2));
            try {
                s.run(argv[0]);
            } catch (Exception e) {
                if (!"true".equals(s.args.get("catch"))) {
                    throw e;
                }
                Out.emit("failed", "error", Out.error(e));
            }
            return null;
        });
    }

    private void run(String scenario) throws Exception {
        switch (scenario) {
            case "normal": normal(); break;
            case "fifo": fifo(); break;
            case "delay": delay(); break;
            case "transaction": transaction(); break;
            case "simple": simple(); break;
            case "push": push(); break;
            case "missing": missing(); break;
            default: throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    private ClientConfiguration config() {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(Boolean.parseBoolean(args.getOrDefault("tls", "false")))
            .setRequestTimeout(Duration.ofMillis(Long.parseLong(args.getOrDefault("requestTimeoutMs", "5000"))));
        if (args.containsKey("ak")) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(args.get("ak"), args.get("sk")));
        }
        if (args.containsKey("namespace")) {
            b.setNamespace(args.get("namespace"));
        }
        return b.build();
    }

    private Producer producer(ProducerBuilder b, String... topics) throws Exception {
        long started = System.currentTimeMillis();
        Producer p = b.setClientConfiguration(config()).setTopics(topics).build();
        Out.emit("started", "ms", System.currentTimeMillis() - started);
        return p;
    }

    private MessageBuilder message(String body) {
        return PROVIDER.newMessageBuilder().setTopic(args.get("topic"))
            .setBody(body.getBytes(StandardCharsets.UTF_8));
    }

    private static Map<String, Object> receipt(SendReceipt r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("messageId", r.getMessageId().toString());
        if (r instanceof SendReceiptImpl) {
            SendReceiptImpl impl = (SendReceiptImpl) r;
            m.put("transactionId", impl.getTransactionId());
            m.put("offset", impl.getOffset());
            m.put("queueId", impl.getMessageQueue().getQueueId());
        }
        return m;
    }

    /** The fields of a received message the tests look at. */
    private static Map<String, Object> view(MessageView v) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("messageId", v.getMessageId().toString());
        m.put("topic", v.getTopic());
        ByteBuffer buf = v.getBody();
        byte[] body = new byte[buf.remaining()];
        buf.duplicate().get(body);
        m.put("body", new String(body, StandardCharsets.UTF_8));
        m.put("tag", v.getTag().orElse(null));
        m.put("keys", new ArrayList<>(v.getKeys()));
        m.put("messageGroup", v.getMessageGroup().orElse(null));
        m.put("deliveryTimestamp", v.getDeliveryTimestamp().orElse(null));
        m.put("bornHost", v.getBornHost());
        m.put("bornTimestamp", v.getBornTimestamp());
        m.put("deliveryAttempt", v.getDeliveryAttempt());
        m.put("properties", new HashMap<>(v.getProperties()));
        m.put("receivedAt", System.currentTimeMillis());
        if (v instanceof MessageViewImpl) {
            MessageViewImpl impl = (MessageViewImpl) v;
            m.put("corrupted", impl.isCorrupted());
            m.put("queueId", impl.getMessageQueue() == null ? null : impl.getMessageQueue().getQueueId());
            m.put("offset", impl.getOffset());
        }
        return m;
    }

    private void normal() throws Exception {
        int n = Integer.parseInt(args.getOrDefault("n", "3"));
        String prefix = args.getOrDefault("prefix", "java5");
        try (Producer p = producer(PROVIDER.newProducerBuilder(), args.get("topic"))) {
            for (int i = 0; i < n; i++) {
                Message msg = message(prefix + "-" + i).setTag("TagA").setKeys("key" + i)
                    .addProperty("color", "red").build();
                Out.emit("sent", "i", i, "receipt", receipt(p.send(msg)));
            }
        }
        if ("true".equals(args.get("consume"))) {
            receiveAll(n, Duration.ofSeconds(15));
        }
    }

    private void fifo() throws Exception {
        int n = Integer.parseInt(args.getOrDefault("n", "12"));
        try (Producer p = producer(PROVIDER.newProducerBuilder(), args.get("topic"))) {
            for (int i = 0; i < n; i++) {
                String group = "group-" + (i % 3);
                Message msg = message("fifo-" + i).setTag("TagF").setMessageGroup(group).build();
                Out.emit("sent", "i", i, "group", group, "receipt", receipt(p.send(msg)));
            }
        }
        receiveAll(n, Duration.ofSeconds(15));
    }

    private void delay() throws Exception {
        long delayMs = Long.parseLong(args.getOrDefault("delayMs", "3000"));
        try (Producer p = producer(PROVIDER.newProducerBuilder(), args.get("topic"))) {
            long at = System.currentTimeMillis() + delayMs;
            SendReceipt r = p.send(message("delayed").setTag("TagD").setDeliveryTimestamp(at).build());
            Out.emit("sent", "body", "delayed", "deliverAt", at, "receipt", receipt(r));
            r = p.send(message("now").setTag("TagD").build());
            Out.emit("sent", "body", "now", "receipt", receipt(r));
        }
        receiveAll(2, Duration.ofSeconds(15));
    }

    private void transaction() throws Exception {
        ProducerBuilder b = PROVIDER.newProducerBuilder().setTransactionChecker(v -> {
            Map<String, Object> m = view(v);
            Out.emit("checked", "message", m);
            return String.valueOf(m.get("body")).startsWith("rollback")
                ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
        });
        try (Producer p = producer(b, args.get("topic"))) {
            for (String kind : new String[] {"commit", "rollback", "unknown"}) {
                Transaction tx = p.beginTransaction();
                SendReceipt r = p.send(message(kind + "-java").setTag("TagT").setKeys("tx-" + kind).build(), tx);
                if (kind.equals("commit")) {
                    tx.commit();
                } else if (kind.equals("rollback")) {
                    tx.rollback();
                }
                Out.emit("sent", "kind", kind, "receipt", receipt(r));
            }
            receiveAll(2, Duration.ofSeconds(15)); // the committed one, and the open one once checked
        }
    }

    /** Receives until `count` distinct messages came (acking each), and emits them. */
    private void receiveAll(int count, Duration invisible) throws Exception {
        Map<String, FilterExpression> subs = Map.of(args.get("topic"), new FilterExpression());
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config())
            .setConsumerGroup(args.get("group")).setSubscriptionExpressions(subs)
            .setAwaitDuration(Duration.ofSeconds(5)).build()) {
            Map<String, Boolean> seen = new HashMap<>();
            while (seen.size() < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("received " + seen.size() + " of " + count + " messages");
                }
                for (MessageView v : c.receive(16, invisible)) {
                    Out.emit("recv", "message", view(v));
                    seen.put(v.getMessageId().toString(), true);
                    c.ack(v);
                }
            }
        }
    }

    private void simple() throws Exception {
        Map<String, FilterExpression> subs = Map.of(args.get("topic"), new FilterExpression("TagA"));
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config())
            .setConsumerGroup(args.get("group")).setSubscriptionExpressions(subs)
            .setAwaitDuration(Duration.ofSeconds(5)).build()) {
            List<MessageView> got = new ArrayList<>();
            while (got.size() < 2 && System.currentTimeMillis() < deadline) {
                got.addAll(c.receive(16, Duration.ofSeconds(10)));
            }
            Out.emit("received", "messages", views(got));
            got.sort((a, b) -> String.valueOf(view(a).get("body")).compareTo(String.valueOf(view(b).get("body"))));
            c.ack(got.get(0));
            c.changeInvisibleDuration(got.get(1), Duration.ofSeconds(2));
            long changed = System.currentTimeMillis();
            List<MessageView> again = c.receive(16, Duration.ofSeconds(10));
            Out.emit("again", "messages", views(again), "afterMs", System.currentTimeMillis() - changed);
            for (MessageView v : again) {
                c.ack(v);
            }
            long started = System.currentTimeMillis();
            List<MessageView> last = c.receive(16, Duration.ofSeconds(10));
            Out.emit("last", "messages", views(last), "waitedMs", System.currentTimeMillis() - started);
        }
    }

    private static List<Map<String, Object>> views(List<MessageView> vs) {
        List<Map<String, Object>> r = new ArrayList<>();
        for (MessageView v : vs) {
            r.add(view(v));
        }
        return r;
    }

    private void push() throws Exception {
        Map<String, FilterExpression> subs = Map.of(args.get("topic"), new FilterExpression());
        CountDownLatch first = new CountDownLatch(1);
        try (PushConsumer c = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config())
            .setConsumerGroup(args.get("group")).setSubscriptionExpressions(subs)
            .setConsumptionThreadCount(2)
            .setMessageListener(v -> {
                Map<String, Object> m = view(v);
                Out.emit("recv", "message", m);
                first.countDown();
                return String.valueOf(m.get("body")).startsWith("fail") ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
            }).build()) {
            Out.emit("ready");
            if (!first.await(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("no message delivered");
            }
            Out.await("stop");
        }
    }

    private void missing() throws Exception {
        long started = System.currentTimeMillis();
        try {
            PROVIDER.newProducerBuilder().setClientConfiguration(config()).setTopics(args.get("topic")).build().close();
            Out.emit("started");
        } catch (Exception e) {
            Out.emit("startup_error", "ms", System.currentTimeMillis() - started, "error", Out.error(e));
        }
        try (Producer p = producer(PROVIDER.newProducerBuilder())) {
            started = System.currentTimeMillis();
            try {
                Out.emit("sent", "receipt", receipt(p.send(message("lost").build())));
            } catch (Exception e) {
                Out.emit("send_error", "ms", System.currentTimeMillis() - started, "error", Out.error(e));
            }
        }
    }
}
