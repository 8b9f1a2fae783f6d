package main

// 5.x end-to-end latency from prebuilt HTTP/2 frames (e2e -proto grpcraw): grpcE2E's phase
// (grpce2e.go: paced, stamped SendMessage calls; long-polling receivers that ack each batch
// without waiting for the answer; latency = receive time - send time on this process's clock) on
// grpcraw.go's connections, the calls made as grpcrawconsume.go makes them.
//
// Each connection is shared by the pacer, which opens SendMessage calls, and its reader
// goroutine, which takes the answers and keeps its receivers' ReceiveMessage calls going; both
// touch the connection under its mutex. A message's receive time is taken when the DATA frame
// that completes its ReceiveMessageResponse is read, before the lock, as grpc-go's receivers take
// it when the stream item arrives. Receiver r runs on connection r % conns, each connection's
// receivers with the prebuilt receive request of its index. At the end, once every send and ack
// was answered, each connection ends as grpc-go's does when its calls' context is cancelled and
// the ClientConn closed (grpce2e.go): RST_STREAM CANCEL on every ReceiveMessage still parked in
// its long poll, GOAWAY, the write side shut; the server's frames of the cancelled streams still
// on their way are taken and dropped, and the connection is closed once the server closed its side
// (at most a second later).

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// rawE2EConn is one connection of the e2e phase.
type rawE2EConn struct {
	mu     sync.Mutex
	rc     *rawConn
	blocks rawBlocks
	recv   []byte // the length-prefixed ReceiveMessageRequest of this connection's receivers
	prefix []byte // the AckMessageRequest's prefix
	acks   int    // AckMessage calls not answered yet
	sendUs []uint32
	// receives cancelled at the end (`cancel`): after it, the server's frames on streams not in
	// flight (their answers' ends, RST_STREAM) and its GOAWAY are dropped, not errors
	cancelled int
}

func (c *rawE2EConn) receive() error {
	return c.rc.open(c.blocks.receive, c.recv, &rawStream{kind: callReceive, ack: startAck(nil, c.prefix)})
}

// owed is what the connection still owes the server before it may cancel (under the mutex): its
// AckMessage calls not answered, and its receives that delivered messages but have not ended
// (their ack is sent at their end). Counting only the first, a receive whose last message was
// read but whose trailers were not yet was cancelled, and its batch was never acked.
func (c *rawE2EConn) owed() int {
	n := c.acks
	for _, s := range c.rc.streams {
		if s.kind == callReceive && s.n > 0 {
			n++
		}
	}
	return n
}

// cancel ends the connection's calls (under the mutex): RST_STREAM CANCEL on each receive in
// flight, the calls not written yet dropped, then GOAWAY (no server-initiated stream processed).
func (c *rawE2EConn) cancel() error {
	rc := c.rc
	rc.queued = rc.queued[:0]
	for id, s := range rc.streams {
		if s.kind != callReceive {
			continue
		}
		if err := rc.wfr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			return err
		}
		delete(rc.streams, id)
		c.cancelled++
	}
	return rc.wfr.WriteGoAway(0, http2.ErrCodeNo, nil)
}

// locked runs fn under the mutex, then writes the calls it released and queued frames.
func (c *rawE2EConn) locked(fn func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := fn()
	if err == nil {
		err = c.rc.release()
	}
	if err == nil {
		err = c.rc.flush()
	}
	return err
}

// read takes the connection's frames until it closes.
func (c *rawE2EConn) read(log *latencyLog, t *tally, stop *atomic.Bool) {
	for {
		f, err := c.rc.fr.ReadFrame()
		if err != nil {
			if !stop.Load() {
				t.fail("connection: " + err.Error())
			}
			return
		}
		now := nowNs()
		if err := c.locked(func() error { return c.take(f, now, log, t, stop) }); err != nil {
			t.fail("connection: " + err.Error())
			return
		}
	}
}

// take is one frame read at `now`.
func (c *rawE2EConn) take(f http2.Frame, now int64, log *latencyLog, t *tally, stop *atomic.Bool) error {
	rc := c.rc
	switch f := f.(type) {
	case *http2.DataFrame:
		rc.data(f)
		s := rc.streams[f.StreamID]
		if s != nil && s.kind == callReceive {
			why := scanReceive(s, func(m []byte) {
				if body, _, ok := field(m, 4); ok { // Message.body
					log.add(body, now)
				}
			})
			if why != "" {
				return fmt.Errorf("receive: %s", why)
			}
		}
		if f.StreamEnded() {
			return fmt.Errorf("stream %d ended without trailers", f.StreamID)
		}
	case *http2.MetaHeadersFrame:
		if !f.StreamEnded() {
			return nil // an answer's headers
		}
		s := rc.streams[f.StreamID]
		delete(rc.streams, f.StreamID)
		if s == nil {
			if c.cancelled > 0 {
				return nil // a cancelled receive's end
			}
			return fmt.Errorf("an answer on stream %d, which is not in flight", f.StreamID)
		}
		switch s.kind {
		case callSend:
			c.sendUs = append(c.sendUs, uint32((now-s.sent)/1000))
			if why := rawVerdict(f.Fields, s.resp); why != "" {
				t.fail("send: " + why)
			} else {
				t.ok.Add(1)
			}
		case callAck:
			c.acks--
			if why := rawVerdict(f.Fields, s.resp); why != "" {
				t.fail("ack: " + why)
			}
		case callReceive:
			if why := endReceive(s, f.Fields); why != "" {
				return fmt.Errorf("receive: %s", why)
			}
			if s.n > 0 {
				c.acks++
				if err := rc.open(c.blocks.ack, s.ack, &rawStream{kind: callAck}); err != nil {
					return err
				}
			}
			if !stop.Load() {
				return c.receive()
			}
		}
	case *http2.RSTStreamFrame:
		if c.cancelled > 0 && rc.streams[f.StreamID] == nil {
			return nil // a cancelled receive
		}
		return fmt.Errorf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
	case *http2.GoAwayFrame:
		if c.cancelled > 0 {
			return nil // the server's answer to ours
		}
		return rc.control(f)
	default:
		return rc.control(f)
	}
	return nil
}

// settled waits (at most `grace`) until `done` says so, checking every 10 ms.
func settled(grace time.Duration, done func() bool) {
	until := time.Now().Add(grace)
	for !done() && time.Now().Before(until) {
		time.Sleep(10 * time.Millisecond)
	}
}

// grpcRawE2E runs the phase; the window (rates, CPU) is the paced sending.
func grpcRawE2E(p Params) (*Result, error) {
	f, stamped, recvs, ackPrefix, err := loadStampedFrames(p)
	if err != nil {
		return nil, err
	}
	blocks := newRawBlocks(p.Addr, f.Metadata)
	conns := make([]*rawE2EConn, p.Conns)
	for i := range conns {
		rc, err := dialRaw(p.Addr, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		defer rc.c.Close()
		conns[i] = &rawE2EConn{rc: rc, blocks: blocks, recv: lengthPrefixed(recvs[i%len(recvs)]), prefix: ackPrefix}
	}
	log := &latencyLog{}
	var answers tally
	var stop atomic.Bool
	var readers sync.WaitGroup
	for _, c := range conns {
		readers.Add(1)
		go func(c *rawE2EConn) {
			defer readers.Done()
			c.read(log, &answers, &stop)
		}(c)
	}
	for r := 0; r < p.Receivers; r++ {
		if err := conns[r%len(conns)].locked(conns[r%len(conns)].receive); err != nil {
			return nil, err
		}
	}
	time.Sleep(300 * time.Millisecond) // receivers parked in their long polls
	var win Window
	win.Start(p.ServerPID)
	sent := paced(p.Rate, p.Seconds, func(k int64) {
		i := int(k % int64(p.Conns))
		req := lengthPrefixed(stamped[i%len(stamped)].at(nowNs()))
		c := conns[i]
		if err := c.locked(func() error { return c.rc.open(c.blocks.send, req, &rawStream{kind: callSend}) }); err != nil {
			answers.fail("send: " + err.Error())
		}
	})
	win.Stop()
	settled(time.Duration(max(3, p.Seconds)*float64(time.Second)), func() bool {
		return answers.ok.Load()+answers.failed.Load() >= sent
	})
	log.await(sent, p.Seconds)
	stop.Store(true)
	settled(3*time.Second, func() bool {
		n := 0
		for _, c := range conns {
			c.mu.Lock()
			n += c.owed()
			c.mu.Unlock()
		}
		return n == 0
	})
	for _, c := range conns {
		if err := c.locked(c.cancel); err != nil {
			answers.fail("cancel: " + err.Error())
		}
		if tc, ok := c.rc.c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	closed := make(chan struct{})
	go func() {
		readers.Wait()
		close(closed)
	}()
	select {
	case <-closed: // the server closed every connection
	case <-time.After(time.Second):
	}
	for _, c := range conns {
		_ = c.rc.c.Close()
	}
	readers.Wait()
	res := log.result(sent, &answers, &win)
	log.mu.Lock()
	res.MaxMs = maxMs(log.us)
	log.mu.Unlock()
	var sendUs []uint32
	for _, c := range conns {
		sendUs = append(sendUs, c.sendUs...)
		res.FlowWaits += c.rc.waits
		res.Cancelled += int64(c.cancelled)
	}
	sendPercentiles(res, sendUs)
	return res, nil
}
