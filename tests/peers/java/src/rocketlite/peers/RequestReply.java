package rocketlite.peers;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.RequestTimeoutException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The two halves of request-reply with the RocketMQ 4.9.8 Java client, each alone in its JVM, so
 * that the other half can be another client (rocketlite's SDK): {@code RequestReply request|reply
 * <namesrv> key=value...}. {@code request}: {@code n} requests "question i" to {@code topic} with
 * {@code DefaultMQProducer.request}, each reply printed ("reply") or its failure ("request_error").
 * {@code reply}: a push consumer of {@code topic} answering {@code n} requests with
 * {@code MessageUtil.createReplyMessage} ("re: " + body) sent by a plain producer ("replied").
 * (Scenarios.requestReply runs both halves in one JVM.)
 */
public final class RequestReply {
    private final String namesrv;
    private final java.util.Map<String, String> args;
    private final long deadline;

    private RequestReply(String namesrv, java.util.Map<String, String> args) {
        this.namesrv = namesrv;
        this.args = args;
        this.deadline = Out.deadline(args);
    }

    public static void main(String[] argv) {
        Out.runAndExit(() -> {
            RequestReply r = new RequestReply(argv[1], Out.args(argv, 2));
            switch (argv[0]) {
                case "request": r.request(); break;
                case "reply": r.reply(); break;
                default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
            }
            return null;
        });
    }

    private void request() throws Exception {
        DefaultMQProducer p = producer(args.get("group"), "requester");
        int n = Integer.parseInt(args.getOrDefault("n", "2"));
        long timeoutMs = Long.parseLong(args.getOrDefault("requestTimeoutMs", "10000"));
        for (int i = 0; i < n; i++) {
            Message q = new Message(args.get("topic"), "Q", "q" + i,
                ("question " + i).getBytes(StandardCharsets.UTF_8));
            try {
                Message reply = p.request(q, timeoutMs);
                Out.emit("reply", "i", i, "body", new String(reply.getBody(), StandardCharsets.UTF_8),
                    "topic", reply.getTopic(),
                    "correlationId", reply.getProperty(MessageConst.PROPERTY_CORRELATION_ID),
                    "requestCorrelationId", q.getProperty(MessageConst.PROPERTY_CORRELATION_ID));
            } catch (RequestTimeoutException e) {
                Out.emit("request_error", "i", i, "error", Out.error(e));
            }
        }
        p.shutdown();
    }

    private void reply() throws Exception {
        int n = Integer.parseInt(args.getOrDefault("n", "2"));
        DefaultMQProducer responder = producer(args.get("group") + "_r", "responder");
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("responder");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(args.get("topic"), "*");
        CountDownLatch answered = new CountDownLatch(n);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m, ("re: " + new String(m.getBody(),
                        StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                    SendResult r = responder.send(reply);
                    Out.emit("replied", "status", r.getSendStatus().name(), "topic", reply.getTopic(),
                        "correlationId", m.getProperty(MessageConst.PROPERTY_CORRELATION_ID),
                        "replyTo", m.getProperty(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT),
                        "ttl", m.getProperty(MessageConst.PROPERTY_MESSAGE_TTL));
                } catch (Exception e) {
                    Out.emit("reply_error", "error", Out.error(e));
                }
                answered.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Out.emit("ready");
        long left = deadline - System.currentTimeMillis();
        if (!answered.await(Math.max(0, left), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("timed out answering (" + answered.getCount() + " requests left)");
        }
        c.shutdown();
        responder.shutdown();
    }

    private DefaultMQProducer producer(String group, String instance) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instance);
        p.start();
        return p;
    }
}
