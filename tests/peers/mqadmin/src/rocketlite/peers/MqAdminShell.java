package rocketlite.peers;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.commons.cli.CommandLine;
import org.apache.commons.cli.DefaultParser;
import org.apache.commons.cli.Options;
import org.apache.commons.cli.ParseException;
import org.apache.rocketmq.acl.common.AclUtils;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.SubCommand;

/**
 * mqadmin 5.3.3 as a shell: one JVM runs many sub-commands, one per line read from stdin.
 *
 * <p>A line is {"id": n, "args": [...]}, the args exactly those `mqadmin` would get ({@code
 * ["topicList", "-n", "127.0.0.1:9876"]}), and for the commands that run until stopped (clusterRT,
 * haStatus -i) "stopAfterMs": their thread is interrupted after that long, as Ctrl-C ends them.
 * Each command runs as `MQAdminStartup.main0` runs it:
 * the sub-command's options on top of ServerUtil's common ones (-h, -n), the name server address
 * set as the `rocketmq.namesrv.addr` property, then `SubCommand.execute` with the RPC hook of
 * `$ROCKETMQ_HOME/conf/tools.yml` (accessKey, secretKey; none without that file), as main0. The
 * one difference: the command line is parsed here, because `ServerUtil.parseCmdLine` calls
 * System.exit on a parse error. What the command prints to System.out and System.err is captured
 * and written back as one JSON line: {"event": "result", "id": n, "args": [...], "out": "...",
 * "err": "...", "error": {...} (absent when none), "ms": n}. The first line is {"event":
 * "ready", "commands": [every sub-command name, in MQAdminStartup's order]}.
 *
 * <p>Commands run one after another, each on a thread of its own. What a command prints goes to its
 * own buffer: System.out and System.err are replaced once by streams that write to the buffer of
 * the printing thread's command (an inheritable thread-local, so the threads a command starts
 * print into its buffer too, and a thread left running by an earlier command never into a later
 * command's). One wait is cut short: at its end every command shuts its admin client down, and
 * the Netty client's shutdown joins its event thread, which polls its queue every 3 s; while the
 * command's thread is in that join, it is interrupted (ServiceThread.shutdown logs the interrupt
 * and goes on; the event thread, already told to stop, ends at its next poll).
 */
public final class MqAdminShell extends MQAdminStartup {
    private static final PrintStream STDOUT = System.out;
    private static final PrintStream STDERR = System.err;
    private static final InheritableThreadLocal<ByteArrayOutputStream[]> SINK = new InheritableThreadLocal<>();

    private MqAdminShell() {
    }

    public static void main(String[] argv) {
        try {
            shell(argv);
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void shell(String[] argv) throws Exception {
        long timeoutMs = argv.length > 0 ? Long.parseLong(argv[0]) : 60_000L;
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        initCommand();
        List<String> names = new ArrayList<>();
        for (SubCommand cmd : SUB_COMMANDS) {
            names.add(cmd.commandName());
        }
        System.setOut(new PrintStream(new Router(0, STDOUT), true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(new Router(1, STDERR), true, StandardCharsets.UTF_8));
        emit(map("event", "ready", "commands", names));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ExecutorService runner = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "mqadmin-command");
            t.setDaemon(true);
            return t;
        });
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            JSONObject request = JSON.parseObject(line);
            long id = request.getLongValue("id");
            List<String> args = request.getJSONArray("args").toJavaList(String.class);
            emit(run(runner, id, args, timeoutMs, request.getLongValue("stopAfterMs")));
        }
        System.exit(0); // clients' threads are not all daemons
    }

    /** Writes to the buffer of the current thread's command, else to the shell's own stream. */
    private static final class Router extends OutputStream {
        private final int which;
        private final PrintStream fallback;

        Router(int which, PrintStream fallback) {
            this.which = which;
            this.fallback = fallback;
        }

        @Override
        public void write(int b) {
            ByteArrayOutputStream[] sink = SINK.get();
            if (sink == null) {
                fallback.write(b);
            } else {
                synchronized (sink[which]) {
                    sink[which].write(b);
                }
            }
        }

        @Override
        public void write(byte[] b, int off, int len) {
            ByteArrayOutputStream[] sink = SINK.get();
            if (sink == null) {
                fallback.write(b, off, len);
            } else {
                synchronized (sink[which]) {
                    sink[which].write(b, off, len);
                }
            }
        }
    }

    private static Map<String, Object> run(
        ExecutorService runner, long id, List<String> args, long timeoutMs, long stopAfterMs) {
        ByteArrayOutputStream[] sink = {new ByteArrayOutputStream(), new ByteArrayOutputStream()};
        Map<String, Object> error = null;
        long start = System.nanoTime();
        Thread[] worker = new Thread[1];
        try {
            Future<?> f = runner.submit(() -> {
                worker[0] = Thread.currentThread();
                SINK.set(sink);
                try {
                    execute(args);
                } finally {
                    System.out.flush();
                    System.err.flush();
                    SINK.remove();
                }
                return null;
            });
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            long stopAt = stopAfterMs > 0 ? start + TimeUnit.MILLISECONDS.toNanos(stopAfterMs) : Long.MAX_VALUE;
            while (true) {
                try {
                    f.get(20, TimeUnit.MILLISECONDS);
                    break;
                } catch (TimeoutException e) {
                    if (System.nanoTime() > deadline) {
                        throw e;
                    }
                    Thread t = worker[0];
                    if (t != null && (joiningEventThread(t) || System.nanoTime() > stopAt)) {
                        stopAt = Long.MAX_VALUE;
                        t.interrupt();
                    }
                }
            }
        } catch (TimeoutException e) {
            error = map("class", "timeout", "message", "no end after " + timeoutMs + " ms", "causes", List.of());
        } catch (java.util.concurrent.ExecutionException e) {
            error = error(e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            error = error(e);
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        String out;
        String err;
        synchronized (sink[0]) {
            out = sink[0].toString(StandardCharsets.UTF_8);
        }
        synchronized (sink[1]) {
            err = sink[1].toString(StandardCharsets.UTF_8);
        }
        return map("event", "result", "id", id, "args", args, "out", out, "err", err, "error", error, "ms", ms);
    }

    /** Whether `t` waits in a Netty client's shutdown for its event thread (see the class comment). */
    private static boolean joiningEventThread(Thread t) {
        boolean join = false;
        for (StackTraceElement e : t.getStackTrace()) {
            if ("join".equals(e.getMethodName()) && "java.lang.Thread".equals(e.getClassName())) {
                join = true;
            } else if (join && "shutdown".equals(e.getMethodName())
                && e.getClassName().endsWith("NettyRemotingClient")) {
                return true;
            }
        }
        return false;
    }

    /** MQAdminStartup.main0 for one sub-command, without its System.exit on a bad command line. */
    private static void execute(List<String> args) throws Exception {
        if (args.isEmpty()) {
            throw new IllegalArgumentException("no sub-command");
        }
        SubCommand cmd = find(args.get(0));
        if (cmd == null) {
            throw new IllegalArgumentException("The sub command " + args.get(0) + " not exist.");
        }
        Options options = cmd.buildCommandlineOptions(ServerUtil.buildCommandlineOptions(new Options()));
        String[] sub = args.subList(1, args.size()).toArray(new String[0]);
        CommandLine line;
        try {
            line = new DefaultParser().parse(options, sub);
        } catch (ParseException e) {
            throw new IllegalArgumentException("bad command line for " + cmd.commandName() + ": " + e.getMessage(), e);
        }
        if (line.hasOption('n')) {
            System.setProperty(MixAll.NAMESRV_ADDR_PROPERTY, line.getOptionValue('n'));
        }
        // as main0: the ACL keys of $ROCKETMQ_HOME/conf/tools.yml, when that file holds them (null
        // otherwise); read for each command, so a test may switch users between commands
        String home = System.getProperty(MixAll.ROCKETMQ_HOME_PROPERTY, System.getenv(MixAll.ROCKETMQ_HOME_ENV));
        cmd.execute(line, options, AclUtils.getAclRPCHook(home + MixAll.ACL_CONF_TOOLS_FILE));
    }

    private static SubCommand find(String name) {
        for (SubCommand cmd : SUB_COMMANDS) {
            if (cmd.commandName().equalsIgnoreCase(name)
                || cmd.commandAlias() != null && cmd.commandAlias().equalsIgnoreCase(name)) {
                return cmd;
            }
        }
        return null;
    }

    /** An exception as the test wants it: class, message, the causes, and the first response code. */
    private static Map<String, Object> error(Throwable t) {
        List<String> causes = new ArrayList<>();
        Map<String, Object> r = map("class", t.getClass().getName(), "message", String.valueOf(t.getMessage()),
            "causes", causes);
        for (Throwable c = t.getCause(); c != null && causes.size() < 6; c = c.getCause()) {
            causes.add(c.getClass().getName() + ": " + c.getMessage());
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof org.apache.rocketmq.client.exception.MQBrokerException) {
                org.apache.rocketmq.client.exception.MQBrokerException b =
                    (org.apache.rocketmq.client.exception.MQBrokerException) c;
                r.put("responseCode", b.getResponseCode());
                r.put("remark", b.getErrorMessage());
                break;
            }
            if (c instanceof org.apache.rocketmq.client.exception.MQClientException) {
                org.apache.rocketmq.client.exception.MQClientException m =
                    (org.apache.rocketmq.client.exception.MQClientException) c;
                if (m.getResponseCode() > 0) {
                    r.put("responseCode", m.getResponseCode());
                    r.put("remark", m.getErrorMessage());
                    break;
                }
            }
        }
        return r;
    }

    private static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static void emit(Map<String, Object> m) {
        synchronized (STDOUT) {
            STDOUT.println(JSON.toJSONString(m));
            STDOUT.flush();
        }
    }
}
