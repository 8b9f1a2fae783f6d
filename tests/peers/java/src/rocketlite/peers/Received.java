package rocketlite.peers;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;

/** A message received by a remoting client (4.x and 5.x `rocketmq-client`) as the tests read it. */
public final class Received {
    private Received() {
    }

    /** The fields of a received message the tests look at. */
    public static Map<String, Object> message(MessageExt m) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", m.getTopic());
        r.put("msgId", m.getMsgId());
        r.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        r.put("queueId", m.getQueueId());
        r.put("queueOffset", m.getQueueOffset());
        r.put("tags", m.getTags());
        r.put("keys", m.getKeys());
        r.put("reconsumeTimes", m.getReconsumeTimes());
        r.put("bornTimestamp", m.getBornTimestamp());
        r.put("storeTimestamp", m.getStoreTimestamp());
        r.put("receivedAt", System.currentTimeMillis());
        r.put("sysFlag", m.getSysFlag());
        r.put("bodyLength", m.getBody() == null ? -1 : m.getBody().length);
        r.put("bodySha256", m.getBody() == null ? null : Out.sha256(m.getBody()));
        String body = m.getBody() == null ? null : new String(m.getBody(), StandardCharsets.UTF_8);
        r.put("body", body != null && body.length() <= 256 ? body : null);
        r.put("properties", new HashMap<>(m.getProperties()));
        return r;
    }
}
