// Scenarios of the RocketMQ Go client (github.com/apache/rocketmq-client-go/v2) against a name
// server, one per process:
//
//	peers <scenario> <namesrv> key=value...
//
// Each prints JSON lines on stdout ("sent", "send_error", "recv", "local", "check", "wait",
// "shutdown", "done"; "fatal" with the error) and exits 0 after "done". The pytest module
// tests/peers/go/test_go.py asserts on those lines and on the broker's state. A scenario that
// needs the test to look at the broker in between prints {"event":"wait"} and reads a line from
// stdin. The client's own log (logrus) goes to stderr.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var (
	outMu    sync.Mutex
	stdin    = bufio.NewReader(os.Stdin)
	namesrv  []string
	args     = map[string]string{}
	deadline time.Time
)

// emit writes one JSON object {"event": event, k1: v1, ...} as one line.
func emit(event string, kv ...interface{}) {
	m := map[string]interface{}{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	line, err := json.Marshal(m)
	if err != nil {
		line, _ = json.Marshal(map[string]interface{}{"event": "fatal", "error": err.Error()})
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

// await tells the test we wait for `what`, then blocks until it writes a line.
func await(what string) {
	emit("wait", "for", what)
	if _, err := stdin.ReadString('\n'); err != nil {
		panic(fmt.Errorf("stdin closed while waiting for %s: %w", what, err))
	}
}

func arg(key string) string {
	v, ok := args[key]
	if !ok {
		panic(fmt.Errorf("missing argument %s=", key))
	}
	return v
}

func intArg(key string, def int) int {
	v, ok := args[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		panic(fmt.Errorf("argument %s=%q: %w", key, v, err))
	}
	return n
}

func check(err error, what string) {
	if err != nil {
		panic(fmt.Errorf("%s: %w", what, err))
	}
}

func sha(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// message: the fields of a received message the tests look at.
func message(m *primitive.MessageExt) map[string]interface{} {
	r := map[string]interface{}{
		"topic":           m.Topic,
		"msgId":           m.MsgId,
		"offsetMsgId":     m.OffsetMsgId,
		"queueOffset":     m.QueueOffset,
		"commitLogOffset": m.CommitLogOffset,
		"tags":            m.GetTags(),
		"keys":            m.GetKeys(),
		"reconsumeTimes":  m.ReconsumeTimes,
		"bornTimestamp":   m.BornTimestamp,
		"storeTimestamp":  m.StoreTimestamp,
		"storeHost":       m.StoreHost,
		"receivedAt":      time.Now().UnixMilli(),
		"sysFlag":         m.SysFlag,
		"bodySha256":      sha(m.Body),
		"body":            string(m.Body),
		"properties":      m.GetProperties(),
		"transactionId":   m.TransactionId,
	}
	if m.Queue != nil {
		r["queueId"] = m.Queue.QueueId
		r["brokerName"] = m.Queue.BrokerName
	}
	return r
}

func sendResult(r *primitive.SendResult) []interface{} {
	kv := []interface{}{"status", int(r.Status), "msgId", r.MsgID, "offsetMsgId", r.OffsetMsgID,
		"queueOffset", r.QueueOffset, "transactionId", r.TransactionID}
	if r.MessageQueue != nil {
		kv = append(kv, "queueId", r.MessageQueue.QueueId, "brokerName", r.MessageQueue.BrokerName)
	}
	return kv
}

func sent(kv []interface{}, r *primitive.SendResult) {
	emit("sent", append(kv, sendResult(r)...)...)
}

// newProducer: one client instance per producer (instance names are unique in the process), so
// nothing is shared between a scenario's producer and consumer.
func newProducer(group string, opts ...producer.Option) rocketmq.Producer {
	opts = append([]producer.Option{
		producer.WithNameServer(namesrv),
		producer.WithGroupName(group),
		producer.WithInstanceName(group + "-p"),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	check(err, "new producer")
	check(p.Start(), "producer start")
	return p
}

type handler func(m *primitive.MessageExt) consumer.ConsumeResult

// newPushConsumer subscribes topic with selector, from the first offset; each message is printed
// as a "recv" line (with `label`) and passed to h. Not started.
func newPushConsumer(group, topic string, selector consumer.MessageSelector, label string, h handler,
	opts ...consumer.Option) rocketmq.PushConsumer {
	opts = append([]consumer.Option{
		consumer.WithNameServer(namesrv),
		consumer.WithGroupName(group),
		consumer.WithInstance(group + "-" + label),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumerModel(consumer.Clustering),
	}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	check(err, "new push consumer")
	err = c.Subscribe(topic, selector, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		result := consumer.ConsumeSuccess
		for _, m := range msgs {
			emit("recv", "consumer", label, "message", message(m))
			if h(m) != consumer.ConsumeSuccess {
				result = consumer.ConsumeRetryLater
			}
		}
		return result, nil
	})
	check(err, "subscribe")
	return c
}

// counter: distinct message ids seen, and a channel closed once `want` of them (matching) arrived.
type counter struct {
	mu   sync.Mutex
	seen map[string]bool
	want int
	done chan struct{}
}

func newCounter(want int) *counter {
	c := &counter{seen: map[string]bool{}, want: want, done: make(chan struct{})}
	if want <= 0 {
		close(c.done)
	}
	return c
}

func (c *counter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[id] {
		return
	}
	c.seen[id] = true
	if len(c.seen) == c.want {
		close(c.done)
	}
}

func (c *counter) wait(what string) {
	select {
	case <-c.done:
	case <-time.After(time.Until(deadline)):
		c.mu.Lock()
		defer c.mu.Unlock()
		panic(fmt.Errorf("timed out waiting for %s: %d of %d", what, len(c.seen), c.want))
	}
}

// settle waits until the consumer's in-memory offsets of topic reach the queues' max offsets, i.e.
// the consume callbacks have returned and their offsets were taken; Shutdown then persists exactly
// those. (A callback that counted its message may still be running when the counter is done.)
func settle(c rocketmq.PushConsumer, topic string) {
	for {
		diff, ok := c.GetOffsetDiffMap()[topic]
		if ok && diff == 0 {
			return
		}
		if time.Now().After(deadline) {
			panic(fmt.Errorf("the consumer's offsets of %s never caught up (%d behind)", topic, diff))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func all(*primitive.MessageExt) bool { return true }

func counting(c *counter, match func(*primitive.MessageExt) bool) handler {
	return func(m *primitive.MessageExt) consumer.ConsumeResult {
		if match(m) {
			c.add(m.MsgId)
		}
		return consumer.ConsumeSuccess
	}
}

func msg(topic, tag string, key string, body string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(body))
	m.WithTag(tag)
	m.WithKeys([]string{key})
	return m
}

// -- producers ------------------------------------------------------------------------------------

// produce: n messages sent `mode` = sync, async or oneway (tag = mode, key = mode-i, property seq=i).
func produce() {
	topic, mode, n := arg("topic"), arg("mode"), intArg("n", 4)
	p := newProducer(arg("group"))
	var wg sync.WaitGroup
	ctx := context.Background()
	for i := 0; i < n; i++ {
		m := msg(topic, mode, fmt.Sprintf("%s-%d", mode, i), fmt.Sprintf("%s %d", mode, i))
		m.WithProperty("seq", strconv.Itoa(i))
		i := i
		switch mode {
		case "sync":
			r, err := p.SendSync(ctx, m)
			check(err, "send")
			sent([]interface{}{"mode", mode, "i", i}, r)
		case "async":
			wg.Add(1)
			err := p.SendAsync(ctx, func(ctx context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					emit("send_error", "mode", mode, "i", i, "error", err.Error())
					return
				}
				sent([]interface{}{"mode", mode, "i", i}, r)
			}, m)
			check(err, "send async")
		case "oneway":
			check(p.SendOneWay(ctx, m), "send oneway")
			emit("sent", "mode", mode, "i", i, "msgId", m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
		default:
			panic("mode " + mode)
		}
	}
	wg.Wait()
	check(p.Shutdown(), "producer shutdown")
}

// batch: one SendSync of n messages (SEND_BATCH_MESSAGE): one request, consecutive offsets of one queue.
func batch() {
	topic, n := arg("topic"), intArg("n", 8)
	msgs := make([]*primitive.Message, n)
	for i := range msgs {
		msgs[i] = msg(topic, "batch", fmt.Sprintf("batch-%d", i), fmt.Sprintf("batch %d", i))
	}
	p := newProducer(arg("group"))
	r, err := p.SendSync(context.Background(), msgs...)
	check(err, "send batch")
	sent([]interface{}{"n", n}, r)
	check(p.Shutdown(), "producer shutdown")
}

// compressed: bodies of 16 KiB and 1 KiB; the first is over the producer's 4 KiB threshold
// (CompressMsgBodyOverHowmuch), so it is sent zlib-compressed (sysFlag bit 0). Both consumed back.
func compressed() {
	topic := arg("topic")
	sizes := []int{16384, 1024}
	got := newCounter(len(sizes))
	c := newPushConsumer(arg("group"), topic, consumer.MessageSelector{}, "zip", counting(got, all))
	check(c.Start(), "consumer start")
	p := newProducer(arg("group") + "_p")
	for _, size := range sizes {
		var sb strings.Builder
		for line := 0; sb.Len() < size; line++ {
			fmt.Fprintf(&sb, "line %d of a body that compresses well\n", line)
		}
		body := []byte(sb.String()[:size])
		m := primitive.NewMessage(topic, body)
		m.WithTag("Z")
		m.WithKeys([]string{fmt.Sprintf("size-%d", size)})
		r, err := p.SendSync(context.Background(), m)
		check(err, "send")
		sent([]interface{}{"size", size, "bodySha256", sha(body)}, r)
	}
	got.wait("both bodies")
	check(c.Shutdown(), "consumer shutdown")
	check(p.Shutdown(), "producer shutdown")
}

// ordered: orders sent with a sharding key through the hash queue selector (each order to one
// queue), then consumed by an orderly push consumer. The test looks at the broker's queue locks
// while the consumer runs.
func ordered() {
	topic, orders, steps := arg("topic"), intArg("orders", 4), intArg("steps", 5)
	p := newProducer(arg("group")+"_p", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	for step := 0; step < steps; step++ {
		for order := 0; order < orders; order++ {
			m := msg(topic, "O", fmt.Sprintf("order-%d", order), fmt.Sprintf("o%d-s%d", order, step))
			m.WithShardingKey(fmt.Sprintf("order-%d", order))
			m.WithProperty("order", strconv.Itoa(order))
			m.WithProperty("step", strconv.Itoa(step))
			r, err := p.SendSync(context.Background(), m)
			check(err, "send ordered")
			sent([]interface{}{"order", order, "step", step}, r)
		}
	}
	check(p.Shutdown(), "producer shutdown")
	got := newCounter(orders * steps)
	c := newPushConsumer(arg("group"), topic, consumer.MessageSelector{}, "orderly", counting(got, all),
		consumer.WithConsumerOrder(true))
	check(c.Start(), "consumer start")
	got.wait("all ordered messages")
	settle(c, topic)
	await("locks checked")
	check(c.Shutdown(), "consumer shutdown")
	emit("shutdown")
}

// -- transactions --------------------------------------------------------------------------------

// txListener ends "commit" and "rollback" at once and leaves "unknown-*" UNKNOWN; the broker then
// checks those back (CHECK_TRANSACTION_STATE) and gets the state their body names.
type txListener struct{ checked chan string }

func stateFor(body string) primitive.LocalTransactionState {
	switch body {
	case "commit", "unknown-commit":
		return primitive.CommitMessageState
	case "rollback", "unknown-rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func stateName(s primitive.LocalTransactionState) string {
	return map[primitive.LocalTransactionState]string{primitive.CommitMessageState: "COMMIT",
		primitive.RollbackMessageState: "ROLLBACK", primitive.UnknowState: "UNKNOWN"}[s]
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	body := string(m.Body)
	state := primitive.UnknowState
	if !strings.HasPrefix(body, "unknown") {
		state = stateFor(body)
	}
	emit("local", "body", body, "transactionId", m.TransactionId, "state", stateName(state))
	return state
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	state := stateFor(string(m.Body))
	emit("check", "message", message(m), "transactionId", m.TransactionId, "answer", stateName(state))
	l.checked <- string(m.Body)
	return state
}

func transaction() {
	topic := arg("topic")
	l := &txListener{checked: make(chan string, 64)}
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNameServer(namesrv),
		producer.WithGroupName(arg("group")+"_tx"),
		producer.WithInstanceName(arg("group")+"-tx"),
		producer.WithRetry(2),
	)
	check(err, "new transaction producer")
	check(p.Start(), "transaction producer start")
	got := newCounter(2) // commit, unknown-commit
	c := newPushConsumer(arg("group"), topic, consumer.MessageSelector{}, "tx", counting(got, all))
	check(c.Start(), "consumer start")
	for _, body := range []string{"commit", "rollback", "unknown-commit", "unknown-rollback"} {
		m := msg(topic, "T", "tx-"+body, body)
		r, err := p.SendMessageInTransaction(context.Background(), m)
		check(err, "send in transaction")
		sent([]interface{}{"body", body, "localState", stateName(r.State)}, r.SendResult)
	}
	pending := map[string]bool{"unknown-commit": true, "unknown-rollback": true}
	for len(pending) > 0 {
		select {
		case body := <-l.checked:
			delete(pending, body)
		case <-time.After(time.Until(deadline)):
			panic(fmt.Errorf("no transaction check for %v", pending))
		}
	}
	got.wait("the committed messages")
	await("transactions ended") // the test reads the broker's half and op queues now
	check(c.Shutdown(), "consumer shutdown")
	check(p.Shutdown(), "producer shutdown")
}

// -- consumers -------------------------------------------------------------------------------------

// push: a concurrent push consumer started first, then n messages; offsets persisted at shutdown.
func push() {
	topic, n := arg("topic"), intArg("n", 16)
	got := newCounter(n)
	c := newPushConsumer(arg("group"), topic, consumer.MessageSelector{}, "push", counting(got, all))
	check(c.Start(), "consumer start")
	p := newProducer(arg("group") + "_p")
	for i := 0; i < n; i++ {
		r, err := p.SendSync(context.Background(), msg(topic, "push", fmt.Sprintf("push-%d", i), fmt.Sprintf("push %d", i)))
		check(err, "send")
		sent([]interface{}{"i", i}, r)
	}
	got.wait(fmt.Sprintf("%d messages", n))
	settle(c, topic)
	await("admin checked") // the test reads the consumer's connection with our admin now
	// Shutdown persists the offsets on the broker.
	check(c.Shutdown(), "consumer shutdown")
	emit("shutdown")
	check(p.Shutdown(), "producer shutdown")
}

// selector: a tag expression or an SQL92 selector; `messages` is tag:a,tag:a,... (property a),
// `expect` how many match. The last message sent gets the key "last".
func selector(sel consumer.MessageSelector) {
	topic := arg("topic")
	got := newCounter(intArg("expect", 1))
	c := newPushConsumer(arg("group"), topic, sel, "selector", counting(got, all))
	check(c.Start(), "consumer start")
	p := newProducer(arg("group") + "_p")
	spec := strings.Split(arg("messages"), ",")
	for i, s := range spec {
		tagAndA := strings.SplitN(s, ":", 2)
		key := "k" + strconv.Itoa(i)
		if i == len(spec)-1 {
			key = "last"
		}
		m := msg(topic, tagAndA[0], key, "m"+strconv.Itoa(i))
		m.WithProperty("a", tagAndA[1])
		r, err := p.SendSync(context.Background(), m)
		check(err, "send")
		sent([]interface{}{"i", i, "tags", tagAndA[0], "a", tagAndA[1]}, r)
	}
	got.wait("the matching messages")
	settle(c, topic)
	check(c.Shutdown(), "consumer shutdown")
	emit("shutdown")
	check(p.Shutdown(), "producer shutdown")
}

// retry: "flaky" fails once and then succeeds; "poison" always fails and goes to the DLQ after
// maxReconsumeTimes; "ok" succeeds at once.
func retry() {
	topic, max := arg("topic"), intArg("max", 2)
	var mu sync.Mutex
	failed := map[string]int{}
	deliveries := newCounter(1 + 2 + max + 1)
	c := newPushConsumer(arg("group"), topic, consumer.MessageSelector{}, "retry",
		func(m *primitive.MessageExt) consumer.ConsumeResult {
			deliveries.add(fmt.Sprintf("%s#%d", m.MsgId, m.ReconsumeTimes))
			mu.Lock()
			defer mu.Unlock()
			key := m.GetKeys()
			if key == "poison" || (key == "flaky" && failed[key] == 0) {
				failed[key]++
				return consumer.ConsumeRetryLater
			}
			return consumer.ConsumeSuccess
		}, consumer.WithMaxReconsumeTimes(int32(max)))
	check(c.Start(), "consumer start")
	p := newProducer(arg("group") + "_p")
	for _, key := range []string{"ok", "flaky", "poison"} {
		r, err := p.SendSync(context.Background(), msg(topic, "R", key, key))
		check(err, "send")
		sent([]interface{}{"key", key}, r)
	}
	deliveries.wait("the deliveries and retries")
	await("dead letter") // the test waits for the DLQ; a further delivery would show up now
	check(c.Shutdown(), "consumer shutdown")
	emit("shutdown")
	check(p.Shutdown(), "producer shutdown")
}

// keepSending: SYNC sends with unique keys and bodies (keyPrefix-i) to `topic`, one at a time
// paceMs apart, until a line arrives on stdin (or the deadline), as an application would through a
// failover: every send that returns is printed, "sent" or "send_error" (after the client's own
// retries), and the loop goes on. The client reads the topic's route again every 30 s (its fixed
// _PullNameServerInterval), which is when it learns a new master's address.
func keepSending() {
	topic, prefix, pace := arg("topic"), args["keyPrefix"], intArg("paceMs", 10)
	p := newProducer(arg("group"))
	stop := make(chan struct{})
	go func() {
		await("a line to stop")
		close(stop)
	}()
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-stop:
			check(p.Shutdown(), "producer shutdown")
			return
		default:
		}
		key := fmt.Sprintf("%s-%d", prefix, i)
		began := time.Now()
		r, err := p.SendSync(context.Background(), msg(topic, "F", key, key))
		ms := time.Since(began).Milliseconds()
		if err != nil {
			emit("send_error", "key", key, "error", err.Error(), "ms", ms)
		} else {
			sent([]interface{}{"key", key, "ms", ms}, r)
		}
		time.Sleep(time.Duration(pace) * time.Millisecond)
	}
	check(p.Shutdown(), "producer shutdown")
}

func run(scenario string) {
	switch scenario {
	case "keepSending":
		keepSending()
	case "produce":
		produce()
	case "batch":
		batch()
	case "compressed":
		compressed()
	case "ordered":
		ordered()
	case "transaction":
		transaction()
	case "push":
		push()
	case "tags":
		selector(consumer.MessageSelector{Type: consumer.TAG, Expression: arg("expression")})
	case "sql92":
		selector(consumer.MessageSelector{Type: consumer.SQL92, Expression: arg("sql")})
	case "retry":
		retry()
	default:
		panic(errors.New("unknown scenario " + scenario))
	}
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: peers <scenario> <namesrv[;namesrv]> key=value...")
		os.Exit(2)
	}
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("warn")
	}
	namesrv = strings.Split(os.Args[2], ";")
	for _, kv := range os.Args[3:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "argument %q is not key=value\n", kv)
			os.Exit(2)
		}
		args[k] = v
	}
	deadline = time.Now().Add(time.Duration(intArg("timeoutMs", 60000)) * time.Millisecond)
	// A hung client must not outlive the test: past the deadline (and a grace period) it exits.
	time.AfterFunc(time.Until(deadline)+5*time.Second, func() {
		emit("fatal", "error", "the scenario outlived its deadline")
		os.Exit(1)
	})
	defer func() {
		if r := recover(); r != nil {
			emit("fatal", "error", fmt.Sprint(r))
			os.Exit(1)
		}
	}()
	run(os.Args[1])
	emit("done")
}
