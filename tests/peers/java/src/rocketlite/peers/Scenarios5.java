package rocketlite.peers;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenarios of the RocketMQ 5.3.3 remoting client (rocketmq-client 5.x, not the gRPC one), as
 * {@link Scenarios} does for 4.9.8: {@code Scenarios5 <scenario> <namesrv> key=value...}.
 * timer: Message.setDeliverTimeMs (5.x timer messages); pop: a push consumer with
 * setClientRebalance(false), which asks the broker for its queues (QUERY_ASSIGNMENT) and POPs;
 * ops: a push consumer left running for an operator's requests the broker relays to it.
 */
public final class Scenarios5 {
    private final String namesrv;
    private final Map<String, String> args;
    private final long deadline;

    private Scenarios5(String namesrv, Map<String, String> args) {
        this.namesrv = namesrv;
        this.args = args;
        this.deadline = Out.deadline(args);
    }

    public static void main(String[] argv) {
        Out.runAndExit(() -> {
            new Scenarios5(argv[1], Out.args(argv, 2)).run(argv[0]);
            return null;
        });
    }

    private void run(String scenario) throws Exception {
        switch (scenario) {
            case "timer": timer(); break;
            case "pop": pop(); break;
            case "ops": ops(); break;
            default: throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    /** A message delivered at now + delayMs, and one sent plainly after it. */
    private void timer() throws Exception {
        String topic = args.get("topic");
        long delayMs = Long.parseLong(args.getOrDefault("delayMs", "3000"));
        DefaultMQProducer p = producer();
        Message timed = new Message(topic, "Timer", "timed", "timed".getBytes(StandardCharsets.UTF_8));
        long deliverAt = System.currentTimeMillis() + delayMs;
        timed.setDeliverTimeMs(deliverAt);
        SendResult r = p.send(timed);
        Out.emit("sent", "body", "timed", "deliverAt", deliverAt, "msgId", r.getMsgId(),
            "status", r.getSendStatus().name(), "queueId", r.getMessageQueue().getQueueId());
        r = p.send(new Message(topic, "Now", "now", "now".getBytes(StandardCharsets.UTF_8)));
        Out.emit("sent", "body", "now", "msgId", r.getMsgId(), "status", r.getSendStatus().name());
        p.shutdown();
        consume(false, 2);
    }

    /** n messages consumed by a push consumer that lets the broker assign queues (POP). */
    private void pop() throws Exception {
        String topic = args.get("topic");
        int n = Integer.parseInt(args.getOrDefault("n", "4"));
        DefaultMQProducer p = producer();
        for (int i = 0; i < n; i++) {
            SendResult r = p.send(new Message(topic, "P", "pop-" + i, ("pop " + i).getBytes(StandardCharsets.UTF_8)));
            Out.emit("sent", "i", i, "msgId", r.getMsgId(), "status", r.getSendStatus().name());
        }
        p.shutdown();
        consume(true, n);
    }

    /**
     * A push consumer (instance name {@code instance}) that runs until the test writes a line:
     * "ready" with its clientId once started, a "recv" event per message. What the broker relays
     * to it from an operator (RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO,
     * CONSUME_MESSAGE_DIRECTLY) is answered by the client library itself; a message consumed
     * directly is a "recv" event too.
     */
    private void ops() throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(args.getOrDefault("instance", "ops"));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(args.get("topic"), "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "message", Received.message(m));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Out.emit("ready", "clientId", c.buildMQClientId());
        Out.await("stop");
        c.shutdown();
    }

    private DefaultMQProducer producer() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(args.get("group") + "_p");
        p.setNamesrvAddr(namesrv);
        p.start();
        return p;
    }

    private void consume(boolean brokerRebalance, int count) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setClientRebalance(!brokerRebalance);
        c.subscribe(args.get("topic"), "*");
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(count);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.emit("recv", "message", Received.message(m));
                if (seen.add(m.getMsgId())) {
                    all.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        if (!all.await(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("timed out waiting for " + count + " messages (" + all.getCount() + " missing)");
        }
        c.shutdown();
    }
}
