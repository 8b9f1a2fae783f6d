package main

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The parts the phases of every protocol share: counting answers (tally), the end-to-end phase's
// connections that read their answers back (dialCounted), its send-time log (latencyLog), pacing
// (paced) and the Result each phase ends with.

// tally counts answers from many goroutines: the good ones, the failed ones and the first failure's reason.
type tally struct {
	ok, failed atomic.Int64
	first      atomic.Value
}

// done is a ConnCodec.Parse callback.
func (t *tally) done(_ int64, ok bool, why string) {
	if ok {
		t.ok.Add(1)
	} else {
		t.fail(why)
	}
}

func (t *tally) fail(why string) {
	t.failed.Add(1)
	t.first.CompareAndSwap(nil, why)
}

func (t *tally) firstError() string {
	e, _ := t.first.Load().(string)
	return e
}

// countResult is a consume phase's Result: `total` messages, one request each, the failures in t.
func countResult(total int64, t *tally, win *Window) *Result {
	res := &Result{Messages: total, Requests: total, Errors: t.failed.Load(), FirstError: t.firstError()}
	win.fill(res)
	return res
}

// e2eSends is an end-to-end phase's send side, once its consumers (which stop at *stop, if given)
// are set: p.Conns connections with codecs mk(i), a frame(codec, k) at a time paced at p.Rate for
// p.Seconds round robin over them in a measured window, then a grace for `log` to receive them.
func e2eSends[C ConnCodec](p Params, log *latencyLog, stop *atomic.Bool, mk func(i int) C,
	frame func(cc C, k int64) []byte) (*Result, error) {
	var answers tally
	var readers sync.WaitGroup
	conns, codecs, err := dialCounted(p.Addr, p.Conns, mk, &answers, &readers)
	if err != nil {
		return nil, err
	}
	defer readers.Wait()
	defer closeAll(conns)
	time.Sleep(300 * time.Millisecond) // consumers parked
	var win Window
	win.Start(p.ServerPID)
	sent := paced(p.Rate, p.Seconds, func(k int64) {
		i := int(k % int64(p.Conns))
		_, _ = conns[i].Write(frame(codecs[i], k))
	})
	win.Stop()
	log.await(sent, p.Seconds)
	if stop != nil {
		stop.Store(true)
	}
	return log.result(sent, &answers, &win), nil
}

// dialCounted opens n connections to addr, each with its codec mk(i) (after its Handshake) and a
// goroutine (in wg) that reads its answers into t until the connection closes.
func dialCounted[C ConnCodec](addr string, n int, mk func(i int) C, t *tally, wg *sync.WaitGroup) ([]net.Conn, []C, error) {
	conns := make([]net.Conn, 0, n)
	codecs := make([]C, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			closeAll(conns)
			return nil, nil, err
		}
		conns = append(conns, c)
		cc := mk(i)
		if err := cc.Handshake(c); err != nil {
			closeAll(conns)
			return nil, nil, err
		}
		codecs = append(codecs, cc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			readAnswers(c, cc, t)
		}()
	}
	return conns, codecs, nil
}

func readAnswers(c net.Conn, cc ConnCodec, t *tally) {
	buf := make([]byte, 1<<20)
	have := 0
	for {
		n, err := c.Read(buf[have:])
		if err != nil {
			return
		}
		have += n
		used, _ := cc.Parse(buf[:have], c, t.done)
		copy(buf, buf[used:have])
		have -= used
	}
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// latencyLog collects receive - send times (µs) of bodies whose first 8 bytes are a send time.
type latencyLog struct {
	mu       sync.Mutex
	us       []uint32
	received atomic.Int64
}

func (l *latencyLog) add(head []byte, now int64) {
	if len(head) < 8 {
		return
	}
	sent := int64(binary.BigEndian.Uint64(head))
	if sent <= 0 || sent > now {
		return
	}
	l.received.Add(1)
	l.mu.Lock()
	l.us = append(l.us, uint32((now-sent)/1000))
	l.mu.Unlock()
}

// await waits until `sent` messages were received, or for a grace of max(3, seconds) seconds.
func (l *latencyLog) await(sent int64, seconds float64) {
	grace := time.Now().Add(time.Duration(max(3, seconds) * float64(time.Second)))
	for l.received.Load() < sent && time.Now().Before(grace) {
		time.Sleep(10 * time.Millisecond)
	}
}

// result is an end-to-end phase's Result: `sent` messages, what was received and their
// latencies, the send answers counted in t.
func (l *latencyLog) result(sent int64, t *tally, win *Window) *Result {
	res := &Result{Sent: sent, Messages: l.received.Load(), Requests: t.ok.Load(), Errors: t.failed.Load(),
		FirstError: t.firstError()}
	win.fill(res)
	l.mu.Lock()
	percentiles(res, l.us)
	l.mu.Unlock()
	return res
}

// paced calls send(k) `rate` times a second for `seconds`, on a 1 ms tick; returns how many.
func paced(rate, seconds float64, send func(k int64)) int64 {
	t0 := time.Now()
	var k int64
	for {
		el := time.Since(t0).Seconds()
		if el >= seconds {
			return k
		}
		due := int64(el*rate) + 1
		for ; k < due; k++ {
			send(k)
		}
		time.Sleep(time.Millisecond)
	}
}
