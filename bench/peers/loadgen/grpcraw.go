package main

// RocketMQ 5.x SendMessage from prebuilt HTTP/2 frames (proto "grpcraw"; its consume and e2e
// phases, on these connections, are grpcrawconsume.go and grpcrawe2e.go): the cheap
// 5.x load source, shaped like the 4.x side (prebuilt requests, one write per request), so the
// broker and not the generator is measured. grpc-go (proto "grpc") spends several times the
// broker's CPU per call on its transport; this mode spends what golang.org/x/net/http2's Framer
// and hpack take to put two frames in a buffer and read the answer's frames.
//
// Per connection: one TCP connection with the client preface, our SETTINGS (1 MiB stream windows)
// and a connection WINDOW_UPDATE to 4 MiB, as grpc-go opens it; the first frame read must be the
// server's SETTINGS (acknowledged). The request's header block is HPACK-encoded once: the fields
// grpc-go sends for a call (:method POST, :scheme http, :path, :authority, content-type, te,
// user-agent) and the harness's call metadata, each either a full match of the static table
// (indexed) or a literal that is never indexed, so the dynamic table is never touched and the
// block's bytes are the same for every stream. A request is that HEADERS frame (END_HEADERS) and
// one DATA frame (END_STREAM) with the length-prefixed gRPC message, on the next odd stream id,
// built by the Framer into a buffer and written with one write.
//
// The reader (one goroutine per connection, which also writes) takes frames with
// Framer.ReadFrame, the header blocks decoded by the Framer's hpack Decoder (ReadMetaHeaders). A
// call is done at its trailers (HEADERS with END_STREAM): grpc-status must be 0 and the answer
// (the DATA frames' gRPC message) must carry status code 20000. Flow control both ways: what is
// read is given back with WINDOW_UPDATEs (connection, and a stream whose answer outgrows half its
// window), and a request is written only when the server's connection window, the new stream's
// window (its SETTINGS_INITIAL_WINDOW_SIZE) and SETTINGS_MAX_CONCURRENT_STREAMS allow it; a
// request that has to wait goes out when a WINDOW_UPDATE or an answer makes room.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	rawStreamWindow = 1 << 20 // our SETTINGS_INITIAL_WINDOW_SIZE (as grpc-go's dialGrpc)
	rawConnWindow   = 1 << 22 // our connection window after the first WINDOW_UPDATE
	h2DefaultWindow = 65535
)

// rawHeaderBlock is the HPACK block of a call's request headers (`method` of the service),
// encoded once.
func rawHeaderBlock(addr, method string, md map[string]string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: grpcService + method},
		{Name: ":authority", Value: addr},
		{Name: "content-type", Value: "application/grpc+proto"},
		{Name: "user-agent", Value: "peersgen-grpcraw"},
		{Name: "te", Value: "trailers"},
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fields = append(fields, hpack.HeaderField{Name: k, Value: md[k]})
	}
	for _, f := range fields {
		// :method POST and :scheme http are full matches of the static table (indexed); the
		// others are literals never indexed (Sensitive), which leave the dynamic table empty.
		f.Sensitive = !(f.Name == ":method" || f.Name == ":scheme")
		_ = enc.WriteField(f) // writes to a bytes.Buffer: no error
	}
	return buf.Bytes()
}

// rawStream is a call in flight: when it was written and its answer's bytes so far.
type rawStream struct {
	sent int64
	resp []byte
	read uint32 // DATA bytes read on the stream not yet given back
	// consume and e2e (grpcrawconsume.go): what the call is, and for a receive the answer's
	// bytes scanned so far, its messages and the AckMessageRequest built from them
	kind    callKind
	scanned int
	n       int
	ack     []byte
}

type rawConn struct {
	c        net.Conn
	fr       *http2.Framer // reads from c
	wfr      *http2.Framer // writes into out
	out      bytes.Buffer
	block    []byte
	msg      []byte // the length-prefixed gRPC message
	next     uint32 // the next stream id
	streams  map[uint32]*rawStream
	sendConn int64 // the server's connection window for our DATA
	peerInit int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	peerMax  int   // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	maxFrame uint32
	unacked  uint32       // connection-level bytes read, not yet given back
	waits    int64        // requests that waited for the server's window or concurrency limit
	queued   []queuedCall // consume, e2e: calls waiting for the server's windows, in order
}

// dialRaw opens the connection and reads the server's first SETTINGS.
func dialRaw(addr string, block, msg []byte) (*rawConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rc := &rawConn{c: c, block: block, msg: msg, next: 1, streams: map[uint32]*rawStream{},
		sendConn: h2DefaultWindow, peerInit: h2DefaultWindow, peerMax: 1 << 30, maxFrame: 16384}
	rc.fr = http2.NewFramer(nil, bufio.NewReaderSize(c, 64<<10))
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.fr.SetReuseFrames() // a DATA frame's bytes are copied out before the next ReadFrame
	rc.wfr = http2.NewFramer(&rc.out, nil)
	rc.out.WriteString(http2.ClientPreface)
	_ = rc.wfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: rawStreamWindow},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	_ = rc.wfr.WriteWindowUpdate(0, rawConnWindow-h2DefaultWindow)
	if err := rc.flush(); err != nil {
		return nil, err
	}
	f, err := rc.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return nil, fmt.Errorf("the server's first frame is %v, not SETTINGS", f.Header())
	}
	if err := rc.settings(sf); err != nil {
		return nil, err
	}
	return rc, rc.flush()
}

func (rc *rawConn) flush() error {
	if rc.out.Len() == 0 {
		return nil
	}
	_, err := rc.c.Write(rc.out.Bytes())
	rc.out.Reset()
	return err
}

// settings applies the server's SETTINGS and queues the ack.
func (rc *rawConn) settings(sf *http2.SettingsFrame) error {
	err := sf.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			rc.peerInit = int64(s.Val) // for new streams; ours have sent all their DATA
		case http2.SettingMaxConcurrentStreams:
			rc.peerMax = int(s.Val)
		case http2.SettingMaxFrameSize:
			rc.maxFrame = s.Val
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rc.wfr.WriteSettingsAck()
}

// canSend: the next request fits the server's windows and concurrency limit.
func (rc *rawConn) canSend() bool {
	n := int64(len(rc.msg))
	return len(rc.streams) < rc.peerMax && rc.sendConn >= n && rc.peerInit >= n
}

// send writes one request (HEADERS + DATA) with one write.
func (rc *rawConn) send() error {
	id := rc.next
	rc.next += 2
	if err := rc.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.block,
		EndHeaders: true}); err != nil {
		return err
	}
	if err := rc.wfr.WriteData(id, true, rc.msg); err != nil {
		return err
	}
	rc.sendConn -= int64(len(rc.msg))
	rc.streams[id] = &rawStream{sent: nowNs()}
	return rc.flush()
}

// rawVerdict reads an answer ("" when it is OK): grpc-status 0 in the trailers, and status code
// 20000 in the message (the DATA frames' bytes, a length-prefixed SendMessageResponse).
func rawVerdict(trailers []hpack.HeaderField, resp []byte) string {
	if why := grpcStatusOK(trailers); why != "" {
		return why
	}
	if len(resp) < 5 {
		return "no answer message"
	}
	n := int(resp[1])<<24 | int(resp[2])<<16 | int(resp[3])<<8 | int(resp[4])
	if resp[0] != 0 || len(resp) != 5+n {
		return fmt.Sprintf("bad gRPC message prefix (flag %d, length %d of %d)", resp[0], n, len(resp)-5)
	}
	if code, msg := statusOf(resp[5:]); code != grpcOK {
		return fmt.Sprintf("status %d: %s", code, msg)
	}
	return ""
}

// data takes a DATA frame: its bytes go to the stream's answer, and what was read is given back
// with WINDOW_UPDATEs (the connection's every quarter window, a stream's every half window).
func (rc *rawConn) data(f *http2.DataFrame) {
	n := f.Header().Length // flow control counts padding too
	rc.unacked += n
	if s := rc.streams[f.StreamID]; s != nil {
		s.resp = append(s.resp, f.Data()...)
		if s.read += n; s.read >= rawStreamWindow/2 && !f.StreamEnded() {
			_ = rc.wfr.WriteWindowUpdate(f.StreamID, s.read)
			s.read = 0
		}
	}
	if rc.unacked >= rawConnWindow/4 {
		_ = rc.wfr.WriteWindowUpdate(0, rc.unacked)
		rc.unacked = 0
	}
}

// control takes the connection's own frames: the server's window updates, SETTINGS (acked),
// PINGs (answered) and GOAWAY (an error); anything else is ignored.
func (rc *rawConn) control(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			rc.sendConn += int64(f.Increment)
		}
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return rc.settings(f)
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			_ = rc.wfr.WritePing(true, f.Data)
		}
	case *http2.GoAwayFrame:
		return fmt.Errorf("GOAWAY %v: %s", f.ErrCode, f.DebugData())
	}
	return nil
}

// drive keeps `window` calls in flight until stopped or, with a quota, that many are answered.
func (rc *rawConn) drive(window int, quota int64, st *connStats, measuring, stopping *atomic.Bool) error {
	var issued, answered int64
	waiting := 0 // requests due but held back by flow control or the concurrency limit
	issue := func() error {
		if quota > 0 && issued >= quota {
			return nil
		}
		issued++
		if !rc.canSend() {
			waiting++
			rc.waits++
			return nil
		}
		return rc.send()
	}
	release := func() error {
		for waiting > 0 && rc.canSend() && !stopping.Load() {
			waiting--
			if err := rc.send(); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 0; i < window; i++ {
		if err := issue(); err != nil {
			return err
		}
	}
	for quota == 0 || answered < quota {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			rc.data(f)
			if f.StreamEnded() { // an answer without trailers
				rc.finish(f.StreamID, nil, st, measuring)
				answered++
				if !stopping.Load() {
					if err := issue(); err != nil {
						return err
					}
				}
			}
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // the answer's headers
			}
			rc.finish(f.StreamID, f.Fields, st, measuring)
			answered++
			if !stopping.Load() {
				if err := issue(); err != nil {
					return err
				}
			}
		case *http2.RSTStreamFrame:
			if rc.streams[f.StreamID] == nil {
				continue // a stream already answered
			}
			rc.finishWith(f.StreamID, fmt.Sprintf("RST_STREAM %v", f.ErrCode), st, measuring)
			answered++
			if !stopping.Load() {
				if err := issue(); err != nil {
					return err
				}
			}
		default:
			if err := rc.control(f); err != nil {
				return err
			}
		}
		if err := release(); err != nil {
			return err
		}
		if err := rc.flush(); err != nil { // acks and window updates of this frame
			return err
		}
	}
	return nil
}

func (rc *rawConn) finish(id uint32, trailers []hpack.HeaderField, st *connStats, measuring *atomic.Bool) {
	s := rc.streams[id]
	if s == nil {
		rc.finishWith(id, fmt.Sprintf("an answer on stream %d, which is not in flight", id), st, measuring)
		return
	}
	rc.finishWith(id, rawVerdict(trailers, s.resp), st, measuring)
}

func (rc *rawConn) finishWith(id uint32, why string, st *connStats, measuring *atomic.Bool) {
	s := rc.streams[id]
	delete(rc.streams, id)
	if !measuring.Load() {
		return
	}
	st.requests++
	if s != nil {
		st.lat = append(st.lat, uint32((nowNs()-s.sent)/1000))
	}
	if why != "" {
		st.errors++
		if st.firstErr == "" {
			st.firstErr = why
		}
	}
}

// grpcRawProduce: SendMessage from prebuilt HTTP/2 frames, `window` calls in flight on each
// connection, timed like produce() (or, with -count, exactly that many calls).
func grpcRawProduce(p Params) (*Result, error) {
	f, sends, _, _, err := loadGrpcFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	block := rawHeaderBlock(p.Addr, "SendMessage", f.Metadata)
	quota := int64(p.Count / p.Conns)
	if p.Count > 0 && quota*int64(p.Conns) != int64(p.Count) {
		return nil, fmt.Errorf("count %d is not a multiple of conns %d", p.Count, p.Conns)
	}
	conns := make([]*rawConn, p.Conns)
	for i := range conns {
		req := sends[i%len(sends)]
		msg := make([]byte, 5, 5+len(req))
		n := len(req)
		msg[1], msg[2], msg[3], msg[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		msg = append(msg, req...)
		if conns[i], err = dialRaw(p.Addr, block, msg); err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		if uint32(len(msg)) > conns[i].maxFrame || uint32(len(block)) > conns[i].maxFrame {
			return nil, fmt.Errorf("a request frame (%d / %d bytes) exceeds SETTINGS_MAX_FRAME_SIZE %d",
				len(block), len(msg), conns[i].maxFrame)
		}
	}
	var measuring, stopping atomic.Bool
	if p.Count > 0 {
		measuring.Store(true)
	}
	stats := make([]connStats, p.Conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(rc *rawConn, st *connStats) {
			defer wg.Done()
			if err := rc.drive(p.Window, quota, st, &measuring, &stopping); err != nil && !stopping.Load() {
				st.errors++
				if st.firstErr == "" {
					st.firstErr = "connection: " + err.Error()
				}
			}
		}(conns[i], &stats[i])
	}
	var win Window
	if p.Count > 0 {
		win.Start(p.ServerPID)
		wg.Wait()
		win.Stop()
		for _, rc := range conns {
			_ = rc.c.Close()
		}
	} else {
		timedWindow(p, &win, &measuring, &stopping)
		time.Sleep(200 * time.Millisecond) // answers in flight arrive (uncounted) before the close
		for _, rc := range conns {
			_ = rc.c.Close()
		}
		wg.Wait()
	}
	res, lat := collect(stats)
	res.Messages = res.Requests
	for _, rc := range conns {
		res.FlowWaits += rc.waits
	}
	win.fill(res)
	percentiles(res, lat)
	return res, nil
}
