package rocketlite.peers;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * What every scenario driver shares (it compiles against every client line): JSON lines on stdout (the test reads them as events), commands
 * from the test on stdin, and `key=value` arguments. One line is written whole, so lines from
 * client callback threads never interleave.
 */
public final class Out {
    private static final BufferedReader STDIN =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    private Out() {
    }

    /** One JSON object: {"event": event, k1: v1, ...}. */
    public static void emit(String event, Object... keyValues) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            m.put((String) keyValues[i], keyValues[i + 1]);
        }
        String line = json(m);
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    /** Tells the test we wait for `what`, then blocks until it writes a line (the line is returned). */
    public static String await(String what) throws IOException {
        emit("wait", "for", what);
        String line = STDIN.readLine();
        if (line == null) {
            throw new IOException("stdin closed while waiting for " + what);
        }
        return line.trim();
    }

    public static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", b));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * An exception as the test wants it: class, message, causes, and the RocketMQ response code
     * and remark of the first exception in the chain that has one (the remoting clients'
     * MQBrokerException / MQClientException getResponseCode and getErrorMessage, found by name so
     * that this class compiles against every client line).
     */
    public static Map<String, Object> error(Throwable t) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("class", t.getClass().getName());
        r.put("message", String.valueOf(t.getMessage()));
        List<String> causes = new ArrayList<>();
        for (Throwable c = t.getCause(); c != null && causes.size() < 5; c = c.getCause()) {
            causes.add(c.getClass().getName() + ": " + c.getMessage());
        }
        r.put("causes", causes);
        for (Throwable c = t; c != null; c = c.getCause()) {
            Object code = call(c, "getResponseCode");
            if (code instanceof Integer && (Integer) code > 0) {
                r.put("responseCode", code);
                r.put("remark", call(c, "getErrorMessage"));
                break;
            }
        }
        return r;
    }

    private static Object call(Object o, String getter) {
        try {
            return o.getClass().getMethod(getter).invoke(o);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    /** A driver's main: runs `scenario`, then exits 0 after a "done" line or 1 after a "fatal" one. */
    public static void runAndExit(Callable<?> scenario) {
        int rc = 0;
        try {
            scenario.call();
            emit("done");
        } catch (Throwable t) {
            emit("fatal", "error", error(t));
            rc = 1;
        }
        System.exit(rc); // the clients' threads are not daemons
    }

    /** When a scenario gives up waiting: `timeoutMs` (default 60 s) from now. */
    public static long deadline(Map<String, String> args) {
        return System.currentTimeMillis() + Long.parseLong(args.getOrDefault("timeoutMs", "60000"));
    }

    /** `key=value` arguments. */
    public static Map<String, String> args(String[] argv, int from) {
        Map<String, String> r = new HashMap<>();
        for (int i = from; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("argument is not key=value: " + argv[i]);
            }
            r.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        return r;
    }

    static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Boolean || v instanceof Number) {
            return v.toString();
        }
        if (v instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        if (v instanceof Collection) {
            StringBuilder sb = new StringBuilder("[");
            for (Object o : (Collection<?>) v) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(o));
            }
            return sb.append(']').toString();
        }
        String s = v.toString();
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }
}
