package rocketlite.peers;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * A RocketMQ 4.9.8 producer that keeps sending through a failover: {@code KeepSending send
 * <namesrv> key=value...}. It sends SYNC messages with unique keys and bodies ({@code keyPrefix-i}) to
 * {@code topic}, one at a time {@code paceMs} apart, until a line arrives on stdin (or
 * {@code timeoutMs}). Every send that returns is printed: "sent" (status, msgId, offsetMsgId — whose
 * address says which broker stored it —, queueId, queueOffset) or "send_error" once the client's own
 * retries ({@code retryTimesWhenSendFailed}) are spent; either way the loop goes on, as an
 * application would. {@code pollNameServerInterval} (ms) is how often the client reads the topic's
 * route again, so how soon it learns the new master's address.
 */
public final class KeepSending {
    private KeepSending() {
    }

    public static void main(String[] argv) {
        Out.runAndExit(() -> {
            send(argv[1], Out.args(argv, 2));
            return null;
        });
    }

    private static void send(String namesrv, java.util.Map<String, String> args) throws Exception {
        long deadline = Out.deadline(args);
        String topic = args.get("topic");
        String prefix = args.getOrDefault("keyPrefix", "k");
        long pace = Long.parseLong(args.getOrDefault("paceMs", "10"));
        DefaultMQProducer p = new DefaultMQProducer(args.getOrDefault("group", "keep_sending_pg"));
        p.setNamesrvAddr(namesrv);
        p.setInstanceName("keep-sending");
        p.setPollNameServerInterval(Integer.parseInt(args.getOrDefault("pollNameServerInterval", "30000")));
        p.setSendMsgTimeout(Integer.parseInt(args.getOrDefault("sendMsgTimeout", "3000")));
        p.start();
        AtomicBoolean stop = new AtomicBoolean();
        Thread stopper = new Thread(() -> {
            try {
                Out.await("a line to stop");
            } catch (java.io.IOException e) {
                // stdin closed: stop as well
            }
            stop.set(true);
        }, "stopper");
        stopper.setDaemon(true);
        stopper.start();
        for (int i = 0; !stop.get() && System.currentTimeMillis() < deadline; i++) {
            String key = prefix + "-" + i;
            Message m = new Message(topic, "F", key, key.getBytes(StandardCharsets.UTF_8));
            long began = System.currentTimeMillis();
            try {
                SendResult r = p.send(m);
                Out.emit("sent", "key", key, "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
                    "offsetMsgId", r.getOffsetMsgId(), "queueId", r.getMessageQueue().getQueueId(),
                    "queueOffset", r.getQueueOffset(), "ms", System.currentTimeMillis() - began);
            } catch (Exception e) {
                Out.emit("send_error", "key", key, "error", Out.error(e), "ms", System.currentTimeMillis() - began);
            }
            Thread.sleep(pace);
        }
        p.shutdown();
    }
}
