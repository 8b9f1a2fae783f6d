package main

// RocketMQ 5.x over gRPC (proto "grpc"): google.golang.org/grpc with a pass-through codec, so the
// requests are protobuf bytes the harness serialized once with rocketlite's generated stubs
// (bench/grpc5/native.py) and no Go code is generated. Answers are read with protowire for the
// fields the phase needs: a status code, and for ReceiveMessage each message's id and receipt
// handle, which go back in one AckMessage per received batch (the 5.x clients' shape).
//
// Each connection is a ClientConn of its own (one HTTP/2 connection), with `window` calls in
// flight on it.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
)

const (
	grpcService     = "/apache.rocketmq.v2.MessagingService/"
	grpcOK          = 20000
	grpcNotFound    = 40401 // MESSAGE_NOT_FOUND: a receive that found nothing
	ackEntriesField = 3     // AckMessageRequest.entries
)

// rawCodec passes bytes through: Marshal takes a *[]byte, Unmarshal copies into one. Its name is
// "proto", so the content type is application/grpc+proto as a generated client sends.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// GrpcFrames is the harness's file: base64 protobuf requests and the call metadata.
type GrpcFrames struct {
	Send      []string          `json:"send"`       // SendMessageRequest, one per connection
	Receive   []string          `json:"receive"`    // ReceiveMessageRequest, one per queue
	AckPrefix string            `json:"ack_prefix"` // AckMessageRequest with group and topic, no entries
	Metadata  map[string]string `json:"metadata"`
}

func loadGrpcFrames(path string) (*GrpcFrames, [][]byte, [][]byte, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var f GrpcFrames
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, nil, nil, err
	}
	dec := func(in []string) ([][]byte, error) {
		out := make([][]byte, len(in))
		for i, s := range in {
			if out[i], err = base64.StdEncoding.DecodeString(s); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	sends, err := dec(f.Send)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	recvs, err := dec(f.Receive)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ack, err := base64.StdEncoding.DecodeString(f.AckPrefix)
	return &f, sends, recvs, ack, err
}

func dialGrpc(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<22))
}

func withMetadata(md map[string]string) context.Context {
	pairs := make([]string, 0, 2*len(md))
	for k, v := range md {
		pairs = append(pairs, k, v)
	}
	return metadata.NewOutgoingContext(context.Background(), metadata.Pairs(pairs...))
}

// field returns the first field `num` of a message (bytes for length-delimited, the value for
// varints) and whether it was there.
func field(b []byte, num protowire.Number) ([]byte, uint64, bool) {
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, 0, false
		}
		b = b[l:]
		switch t {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, 0, false
			}
			if n == num {
				return v, 0, true
			}
			b = b[m:]
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, 0, false
			}
			if n == num {
				return nil, v, true
			}
			b = b[m:]
		default:
			m := protowire.ConsumeFieldValue(n, t, b)
			if m < 0 {
				return nil, 0, false
			}
			b = b[m:]
		}
	}
	return nil, 0, false
}

// statusOf reads `status` (field 1: Status{code = 1, message = 2}) of a response.
func statusOf(resp []byte) (uint64, string) {
	st, _, ok := field(resp, 1)
	if !ok {
		return 0, "no status"
	}
	_, code, _ := field(st, 1)
	msg, _, _ := field(st, 2)
	return code, string(msg)
}

// grpcProduce: SendMessage, one prebuilt request (one message) per call, `window` calls in
// flight on each connection, timed like produce() (or, with -count, exactly that many calls).
func grpcProduce(p Params) (*Result, error) {
	f, sends, _, _, err := loadGrpcFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	ctx := withMetadata(f.Metadata)
	var measuring, stopping atomic.Bool
	stats := make([]connStats, p.Conns*p.Window)
	conns := make([]*grpc.ClientConn, p.Conns)
	for i := range conns {
		if conns[i], err = dialGrpc(p.Addr); err != nil {
			return nil, err
		}
		conns[i].Connect()
	}
	quota := p.Count / (p.Conns * p.Window) // calls of each slot in a fill (0: timed)
	if p.Count > 0 {
		if quota*p.Conns*p.Window != p.Count {
			return nil, fmt.Errorf("count %d is not a multiple of conns x window", p.Count)
		}
		measuring.Store(true)
	}
	var win Window
	var wg sync.WaitGroup
	for i := range conns {
		for w := 0; w < p.Window; w++ {
			wg.Add(1)
			go func(c *grpc.ClientConn, req []byte, st *connStats) {
				defer wg.Done()
				var resp []byte
				for n := 0; !stopping.Load() && (quota == 0 || n < quota); n++ {
					t := nowNs()
					err := c.Invoke(ctx, grpcService+"SendMessage", &req, &resp)
					if !measuring.Load() {
						continue
					}
					st.requests++
					st.lat = append(st.lat, uint32((nowNs()-t)/1000))
					why := ""
					if err != nil {
						why = err.Error()
					} else if code, msg := statusOf(resp); code != grpcOK {
						why = fmt.Sprintf("status %d: %s", code, msg)
					}
					if why != "" {
						st.errors++
						if st.firstErr == "" {
							st.firstErr = why
						}
					}
				}
			}(conns[i], sends[i%len(sends)], &stats[i*p.Window+w])
		}
	}
	if p.Count > 0 { // a fill: every call counted (the window opened before the first)
		win.Start(p.ServerPID)
		wg.Wait()
		win.Stop()
	} else {
		timedWindow(p, &win, &measuring, &stopping)
		wg.Wait()
	}
	for _, c := range conns {
		_ = c.Close()
	}
	res, lat := collect(stats)
	res.Messages = res.Requests
	win.fill(res)
	percentiles(res, lat)
	return res, nil
}

// grpcConsume: per queue, ReceiveMessage (server streaming, the prebuilt request's batch) and one
// AckMessage with every message it returned, until a receive finds nothing or `seconds` pass.
// Latency samples are the receive+ack round trips; the window (rate, CPU) closes at the last ack.
func grpcConsume(p Params) (*Result, error) {
	f, _, recvs, ackPrefix, err := loadGrpcFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	ctx := withMetadata(f.Metadata)
	return consumeRun(p, len(recvs), func(q int, st *connStats, msgs *int64, stop *atomic.Bool,
		lastAck *atomic.Int64) error {
		c, err := dialGrpc(p.Addr)
		if err != nil {
			return err
		}
		defer c.Close()
		req := recvs[q]
		var resp []byte
		for !stop.Load() {
			t := nowNs()
			s, err := openReceive(ctx, c, req)
			if err != nil {
				return err
			}
			ack, n := receiveBatch(s, ackPrefix, nil)
			if n == 0 {
				return nil // drained
			}
			if err := c.Invoke(ctx, grpcService+"AckMessage", &ack, &resp); err != nil {
				return err
			}
			if code, msg := statusOf(resp); code != grpcOK {
				return fmt.Errorf("ack status %d: %s", code, msg)
			}
			*msgs += int64(n)
			lastAck.Store(nowNs())
			st.requests++
			st.lat = append(st.lat, uint32((nowNs()-t)/1000))
		}
		return nil
	}), nil
}

// consumeRun is a consume phase around n receivers: receiver q runs in a goroutine of its own,
// counting its rounds into st and its messages into msgs, until drained or *stop (an error it
// returns is counted as st's); the window is drainWindow's.
func consumeRun(p Params, n int, receiver func(q int, st *connStats, msgs *int64, stop *atomic.Bool,
	lastAck *atomic.Int64) error) *Result {
	var stop atomic.Bool
	var lastAck atomic.Int64
	stats := make([]connStats, n)
	msgs := make([]int64, n)
	var win Window
	win.Start(p.ServerPID)
	var wg sync.WaitGroup
	for q := 0; q < n; q++ {
		wg.Add(1)
		go func(q int) {
			defer wg.Done()
			if err := receiver(q, &stats[q], &msgs[q], &stop, &lastAck); err != nil {
				stats[q].errors++
				if stats[q].firstErr == "" {
					stats[q].firstErr = err.Error()
				}
			}
		}(q)
	}
	win = drainWindow(p, win, &stop, &lastAck, wg.Wait)
	res, lat := collect(stats)
	for _, m := range msgs {
		res.Messages += m
	}
	win.fill(res)
	percentiles(res, lat)
	return res
}

// drainWindow is a consume phase's measurement, opened (win) before the receivers start: `stop`
// is set after p.Seconds; `wait` returns once every receiver is done. The window closes at the
// last ack (lastAck: its time), not after the empty long polls (5 s at least) that end each
// receiver: every 20 ms after an ack, the CPU counters are read again and kept.
func drainWindow(p Params, win Window, stop *atomic.Bool, lastAck *atomic.Int64, wait func()) Window {
	timer := time.AfterFunc(time.Duration(p.Seconds*float64(time.Second)), func() { stop.Store(true) })
	var cut Window
	cut.Start(p.ServerPID)
	cut.t0, cut.srv0, cut.gen0, cut.mach0 = win.t0, win.srv0, win.gen0, win.mach0
	cut.srvW0, cut.genW0 = win.srvW0, win.genW0
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		seen := int64(0)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if a := lastAck.Load(); a != seen {
					seen = a
					cut.Stop()
				}
			}
		}
	}()
	wait()
	close(done)
	<-sampled
	timer.Stop()
	win.Stop()
	if cut.finished {
		win = cut
	}
	return win
}

// openReceive starts one ReceiveMessage call (server streaming) with the prebuilt request.
func openReceive(ctx context.Context, c *grpc.ClientConn, req []byte) (grpc.ClientStream, error) {
	desc := &grpc.StreamDesc{StreamName: "ReceiveMessage", ServerStreams: true}
	s, err := c.NewStream(ctx, desc, grpcService+"ReceiveMessage")
	if err == nil {
		err = s.SendMsg(&req)
	}
	if err == nil {
		err = s.CloseSend()
	}
	return s, err
}

// receiveBatch reads a ReceiveMessage stream to its end: the AckMessageRequest (ackPrefix and an
// entry per message) and how many messages came; each (if not nil) sees every Message as it arrives.
func receiveBatch(s grpc.ClientStream, ackPrefix []byte, each func(m []byte)) ([]byte, int) {
	ack := append([]byte(nil), ackPrefix...)
	n := 0
	var item []byte
	for {
		if err := s.RecvMsg(&item); err != nil {
			return ack, n // io.EOF at the end of the stream
		}
		m, _, ok := field(item, 2)
		if !ok {
			continue // the status or the delivery timestamp
		}
		if each != nil {
			each(m)
		}
		ack = appendAckEntry(ack, m)
		n++
	}
}

// appendAckEntry appends to an AckMessageRequest the entry (message id, receipt handle) of a
// received Message m (system_properties = 3: message_id = 3, receipt_handle = 12), with no
// allocation of its own.
func appendAckEntry(ack, m []byte) []byte {
	sys, _, _ := field(m, 3)
	id, _, _ := field(sys, 3)
	handle, _, _ := field(sys, 12)
	size := 2 + protowire.SizeBytes(len(id)) + protowire.SizeBytes(len(handle)) // two 1-byte tags
	ack = protowire.AppendTag(ack, ackEntriesField, protowire.BytesType)
	ack = protowire.AppendVarint(ack, uint64(size))
	ack = protowire.AppendTag(ack, 1, protowire.BytesType)
	ack = protowire.AppendBytes(ack, id)
	ack = protowire.AppendTag(ack, 2, protowire.BytesType)
	return protowire.AppendBytes(ack, handle)
}
