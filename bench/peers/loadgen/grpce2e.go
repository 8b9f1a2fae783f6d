package main

// 5.x end-to-end latency (e2e -proto grpc): SendMessage calls paced at `rate` over `conns`
// HTTP/2 connections, each call's body stamped with its send time; `receivers` long-polling
// ReceiveMessage loops (the prebuilt request's batch size, long polling timeout and invisible
// duration, as a 5.x client asks) that take each message's receive time as it arrives and ack
// every batch with one AckMessage whose answer they do not wait for before receiving again.
// Latency = receive time - send time on this process's monotonic clock (nowNs), so no clocks are
// compared across processes. The send answer's round trip is reported too (send_p50/p99_ms).
//
// The harness's send requests carry a body whose first 8 bytes are stampMarker; the time goes
// there (big endian ns) and the body's CRC32 digest (8 upper-case hex digits) is recomputed in
// place, since the broker checks it.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

var stampMarker = []byte("E2ESTAMP")

// stampedSend is one prebuilt SendMessageRequest with the positions of its stamp and checksum.
type stampedSend struct {
	req             []byte
	body, sum, size int
}

func newStampedSend(req []byte, size int) (*stampedSend, error) {
	at := bytes.Index(req, stampMarker)
	if at < 0 || at+size > len(req) {
		return nil, fmt.Errorf("send request has no %q body of %d bytes", stampMarker, size)
	}
	hex := []byte(fmt.Sprintf("%08X", crc32.ChecksumIEEE(req[at:at+size])))
	sum := bytes.Index(req, hex)
	if sum < 0 {
		return nil, fmt.Errorf("send request has no CRC32 digest %s of its body", hex)
	}
	return &stampedSend{req: req, body: at, sum: sum, size: size}, nil
}

// at is a copy of the request stamped with t.
func (s *stampedSend) at(t int64) []byte {
	out := append([]byte(nil), s.req...)
	binary.BigEndian.PutUint64(out[s.body:], uint64(t))
	copy(out[s.sum:], fmt.Sprintf("%08X", crc32.ChecksumIEEE(out[s.body:s.body+s.size])))
	return out
}

// loadStampedFrames reads the e2e phase's frames: the sends ready to be stamped, the receive
// requests and the ack prefix.
func loadStampedFrames(p Params) (*GrpcFrames, []*stampedSend, [][]byte, []byte, error) {
	f, sends, recvs, ackPrefix, err := loadGrpcFrames(p.Frames)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stamped := make([]*stampedSend, len(sends))
	for i, r := range sends {
		if stamped[i], err = newStampedSend(r, p.Size); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return f, stamped, recvs, ackPrefix, nil
}

// grpcE2E runs the phase; the window (rates, CPU) is the paced sending.
func grpcE2E(p Params) (*Result, error) {
	f, stamped, recvs, ackPrefix, err := loadStampedFrames(p)
	if err != nil {
		return nil, err
	}
	ctx := withMetadata(f.Metadata)
	conns := make([]*grpc.ClientConn, p.Conns)
	for i := range conns {
		if conns[i], err = dialGrpc(p.Addr); err != nil {
			return nil, err
		}
		conns[i].Connect()
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	log := &latencyLog{}
	var answers tally
	var stop atomic.Bool
	var receivers, acks sync.WaitGroup
	polls, cancel := context.WithCancel(ctx) // ends the parked long polls at the end
	defer cancel()
	for r := 0; r < p.Receivers; r++ {
		receivers.Add(1)
		go func(c *grpc.ClientConn, req []byte) {
			defer receivers.Done()
			receiveLoop(ctx, polls, c, req, ackPrefix, log, &answers, &acks, &stop)
		}(conns[r%len(conns)], recvs[r%len(recvs)])
	}
	time.Sleep(300 * time.Millisecond) // receivers parked in their long polls
	var sendMu sync.Mutex
	var sendUs []uint32
	var sending sync.WaitGroup
	var win Window
	win.Start(p.ServerPID)
	sent := paced(p.Rate, p.Seconds, func(k int64) {
		i := int(k % int64(p.Conns))
		req := stamped[i%len(stamped)].at(nowNs())
		sending.Add(1)
		go func(c *grpc.ClientConn) {
			defer sending.Done()
			t := nowNs()
			var resp []byte
			err := c.Invoke(ctx, grpcService+"SendMessage", &req, &resp)
			us := uint32((nowNs() - t) / 1000)
			if err != nil {
				answers.fail("send: " + err.Error())
			} else if code, msg := statusOf(resp); code != grpcOK {
				answers.fail(fmt.Sprintf("send status %d: %s", code, msg))
			} else {
				answers.ok.Add(1)
			}
			sendMu.Lock()
			sendUs = append(sendUs, us)
			sendMu.Unlock()
		}(conns[i])
	})
	win.Stop()
	sending.Wait()
	log.await(sent, p.Seconds)
	stop.Store(true)
	cancel()
	receivers.Wait()
	acks.Wait()
	res := log.result(sent, &answers, &win)
	log.mu.Lock()
	res.MaxMs = maxMs(log.us)
	log.mu.Unlock()
	sendPercentiles(res, sendUs)
	return res, nil
}

// sendPercentiles sets the send answers' p50/p99 (ms) from their round trips in microseconds.
func sendPercentiles(res *Result, sendUs []uint32) {
	sort.Slice(sendUs, func(i, j int) bool { return sendUs[i] < sendUs[j] })
	if n := len(sendUs); n > 0 {
		res.SendP50ms = float64(sendUs[n/2]) / 1000
		res.SendP99ms = float64(sendUs[int(0.99*float64(n-1))]) / 1000
	}
}

func maxMs(us []uint32) float64 {
	m := uint32(0)
	for _, v := range us {
		m = max(m, v)
	}
	return float64(m) / 1000
}

// receiveLoop: ReceiveMessage after ReceiveMessage until *stop; each message's receive time is
// taken as its stream item arrives; the batch is acked in a goroutine (in acks) not waited for.
// The long polls run in `polls`, cancelled once the phase is over.
func receiveLoop(ctx, polls context.Context, c *grpc.ClientConn, req, ackPrefix []byte, log *latencyLog, t *tally,
	acks *sync.WaitGroup, stop *atomic.Bool) {
	for !stop.Load() {
		s, err := openReceive(polls, c, req)
		if err != nil {
			if !stop.Load() {
				t.fail("receive: " + err.Error())
			}
			return
		}
		ack, n := receiveBatch(s, ackPrefix, func(m []byte) {
			now := nowNs()
			if body, _, ok := field(m, 4); ok { // Message.body
				log.add(body, now)
			}
		})
		if n == 0 {
			continue
		}
		acks.Add(1)
		go func(ack []byte) {
			defer acks.Done()
			var resp []byte
			if err := c.Invoke(ctx, grpcService+"AckMessage", &ack, &resp); err != nil {
				t.fail("ack: " + err.Error())
			} else if code, msg := statusOf(resp); code != grpcOK {
				t.fail(fmt.Sprintf("ack status %d: %s", code, msg))
			}
		}(ack)
	}
}
