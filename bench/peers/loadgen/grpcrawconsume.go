package main

// RocketMQ 5.x ReceiveMessage + AckMessage from prebuilt HTTP/2 frames (consume -proto grpcraw):
// the consume phase of grpcConsume (grpcgen.go) without grpc-go's transport, on grpcraw.go's
// connections. Each connection runs one receiver, as grpcConsume's ClientConns do: a
// ReceiveMessage call (the prebuilt request, its header block encoded once), its answer stream
// read to the trailers, then one AckMessage with an entry per message it returned, and the next
// receive once the ack is answered; a receive that returns nothing ends the connection (drained).
//
// The answer stream is the DATA frames' bytes: gRPC length-prefixed ReceiveMessageResponses
// (1 flag byte, 4 length bytes, the message), each a status (field 1: 20000, or 40401 when
// nothing was found), a Message (field 2) or a delivery timestamp (field 3). A Message is read
// with protowire for what the ack needs (field(): system_properties.message_id and
// receipt_handle, appendAckEntry), and the AckMessageRequest is the harness's prefix (group,
// topic) with those entries appended, in a buffer reused from call to call: no protobuf object
// is made. A call's DATA is split at the server's SETTINGS_MAX_FRAME_SIZE, and a call is written
// only when the server's connection window, a new stream's window and its concurrency limit hold
// it; otherwise it waits, in order, for a WINDOW_UPDATE or an answer (a stream id is taken when
// the call is written, so ids rise in the order the streams open).

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// callKind is what a raw consume / e2e stream carries.
type callKind uint8

const (
	callSend callKind = iota
	callReceive
	callAck
)

// queuedCall is a call not written yet: its header block, message and stream.
type queuedCall struct {
	block, msg []byte
	s          *rawStream
}

// lengthPrefixed is msg as one gRPC message (not compressed).
func lengthPrefixed(msg []byte) []byte {
	n := len(msg)
	out := make([]byte, 5, 5+n)
	out[1], out[2], out[3], out[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return append(out, msg...)
}

// open starts a call: written now (not flushed) if nothing waits before it and the server's
// windows and concurrency limit hold it, else queued until release() can write it.
func (rc *rawConn) open(block, msg []byte, s *rawStream) error {
	if int64(len(msg)) > rc.peerInit {
		return fmt.Errorf("a request of %d bytes exceeds the server's stream window %d", len(msg), rc.peerInit)
	}
	if len(rc.queued) > 0 || !rc.fits(msg) {
		rc.waits++
		rc.queued = append(rc.queued, queuedCall{block, msg, s})
		return nil
	}
	return rc.writeCall(block, msg, s)
}

func (rc *rawConn) fits(msg []byte) bool {
	return rc.sendConn >= int64(len(msg)) && rc.peerInit >= int64(len(msg)) && len(rc.streams) < rc.peerMax
}

// release writes the queued calls that the server's windows now hold, in order.
func (rc *rawConn) release() error {
	for len(rc.queued) > 0 && rc.fits(rc.queued[0].msg) {
		q := rc.queued[0]
		rc.queued = rc.queued[1:]
		if err := rc.writeCall(q.block, q.msg, q.s); err != nil {
			return err
		}
	}
	return nil
}

// writeCall puts HEADERS and the DATA frames of one call on the next stream into the buffer.
func (rc *rawConn) writeCall(block, msg []byte, s *rawStream) error {
	id := rc.next
	rc.next += 2
	if err := rc.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block,
		EndHeaders: true}); err != nil {
		return err
	}
	for rest := msg; ; {
		n := min(len(rest), int(rc.maxFrame))
		if err := rc.wfr.WriteData(id, n == len(rest), rest[:n]); err != nil {
			return err
		}
		if rest = rest[n:]; len(rest) == 0 {
			break
		}
	}
	rc.sendConn -= int64(len(msg))
	s.sent = nowNs()
	rc.streams[id] = s
	return nil
}

// startAck begins the AckMessageRequest of a receive, as one length-prefixed gRPC message, in buf.
func startAck(buf, prefix []byte) []byte {
	return append(append(buf[:0], 0, 0, 0, 0, 0), prefix...)
}

// scanReceive reads the complete ReceiveMessageResponses of a receive's answer not scanned yet:
// each Message is counted, seen by `each` (if not nil) and given an entry in s.ack; "" or why the
// answer is not one.
func scanReceive(s *rawStream, each func(m []byte)) string {
	for {
		resp := s.resp[s.scanned:]
		if len(resp) < 5 {
			return ""
		}
		size := int(resp[1])<<24 | int(resp[2])<<16 | int(resp[3])<<8 | int(resp[4])
		if resp[0] != 0 {
			return fmt.Sprintf("a compressed or bad gRPC message (flag %d)", resp[0])
		}
		if len(resp) < 5+size {
			return "" // the rest comes in the next DATA frame
		}
		item := resp[5 : 5+size]
		s.scanned += 5 + size
		if m, _, ok := field(item, 2); ok {
			if each != nil {
				each(m)
			}
			s.ack = appendAckEntry(s.ack, m)
			s.n++
		} else if st, _, ok := field(item, 1); ok {
			if _, code, _ := field(st, 1); code != grpcOK && code != grpcNotFound {
				msg, _, _ := field(st, 2)
				return fmt.Sprintf("receive status %d: %s", code, msg)
			}
		}
	}
}

// endReceive checks a receive's trailers and that its answer was read to the end, and sets the
// length of s.ack's gRPC prefix; "" or why not.
func endReceive(s *rawStream, trailers []hpack.HeaderField) string {
	if why := grpcStatusOK(trailers); why != "" {
		return why
	}
	if why := scanReceive(s, nil); why != "" {
		return why
	}
	if s.scanned != len(s.resp) {
		return fmt.Sprintf("a gRPC message cut short (%d bytes)", len(s.resp)-s.scanned)
	}
	size := len(s.ack) - 5
	s.ack[1], s.ack[2], s.ack[3], s.ack[4] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	return ""
}

// rawReceiver is one connection's receive + ack loop.
type rawReceiver struct {
	rc               *rawConn
	recvBlock, recv  []byte // ReceiveMessage's header block and length-prefixed request
	ackBlock, prefix []byte // AckMessage's header block and the request's prefix (no entries)
	started          int64  // when the current receive was opened
	batch            int    // messages of the receive being acked
	spare, ackBuf    []byte // reused: an answer's bytes, the AckMessage request
}

func (r *rawReceiver) receive() error {
	r.started = nowNs()
	s := &rawStream{kind: callReceive, resp: r.spare[:0], ack: startAck(r.ackBuf, r.prefix)}
	return r.rc.open(r.recvBlock, r.recv, s)
}

// run receives and acks until a receive finds nothing or *stop; counts into st and msgs.
func (r *rawReceiver) run(st *connStats, msgs *int64, stop *atomic.Bool, lastAck *atomic.Int64) error {
	rc := r.rc
	if err := r.receive(); err != nil {
		return err
	}
	for {
		if err := rc.release(); err != nil {
			return err
		}
		if err := rc.flush(); err != nil { // calls, acks and window updates of this frame
			return err
		}
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			rc.data(f)
			if f.StreamEnded() {
				return fmt.Errorf("stream %d ended without trailers", f.StreamID)
			}
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // an answer's headers
			}
			s := rc.streams[f.StreamID]
			delete(rc.streams, f.StreamID)
			if s == nil {
				return fmt.Errorf("an answer on stream %d, which is not in flight", f.StreamID)
			}
			r.spare = s.resp[:0] // read before the next call reuses it
			switch s.kind {
			case callReceive:
				if why := endReceive(s, f.Fields); why != "" {
					return fmt.Errorf("receive: %s", why)
				}
				if s.n == 0 {
					return nil // drained
				}
				r.batch, r.ackBuf = s.n, s.ack
				if err := rc.open(r.ackBlock, s.ack, &rawStream{kind: callAck, resp: s.resp[:0]}); err != nil {
					return err
				}
			case callAck:
				if why := rawVerdict(f.Fields, s.resp); why != "" {
					return fmt.Errorf("ack: %s", why)
				}
				*msgs += int64(r.batch)
				lastAck.Store(nowNs())
				st.requests++
				st.lat = append(st.lat, uint32((nowNs()-r.started)/1000))
				if stop.Load() {
					return nil
				}
				if err := r.receive(); err != nil {
					return err
				}
			}
		case *http2.RSTStreamFrame:
			return fmt.Errorf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
		default:
			if err := rc.control(f); err != nil {
				return err
			}
		}
	}
}

// grpcStatusOK is "" when the trailers say grpc-status 0, else why not.
func grpcStatusOK(trailers []hpack.HeaderField) string {
	status, msg := "", ""
	for _, f := range trailers {
		switch f.Name {
		case "grpc-status":
			status = f.Value
		case "grpc-message":
			msg = f.Value
		}
	}
	if status != "0" {
		return fmt.Sprintf("grpc-status %q: %s", status, msg)
	}
	return ""
}

// rawBlocks are the header blocks of the three calls, each encoded once.
type rawBlocks struct{ send, receive, ack []byte }

func newRawBlocks(addr string, md map[string]string) rawBlocks {
	return rawBlocks{rawHeaderBlock(addr, "SendMessage", md), rawHeaderBlock(addr, "ReceiveMessage", md),
		rawHeaderBlock(addr, "AckMessage", md)}
}

// grpcRawConsume: grpcConsume's phase (one receiver per prebuilt receive request, each on a
// connection of its own) from prebuilt HTTP/2 frames; the same counts and window.
func grpcRawConsume(p Params) (*Result, error) {
	f, _, recvs, ackPrefix, err := loadGrpcFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	blocks := newRawBlocks(p.Addr, f.Metadata)
	receivers := make([]*rawReceiver, len(recvs))
	for q, req := range recvs {
		rc, err := dialRaw(p.Addr, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", q, err)
		}
		defer rc.c.Close()
		receivers[q] = &rawReceiver{rc: rc, recvBlock: blocks.receive, recv: lengthPrefixed(req),
			ackBlock: blocks.ack, prefix: ackPrefix}
	}
	res := consumeRun(p, len(receivers), func(q int, st *connStats, msgs *int64, stop *atomic.Bool,
		lastAck *atomic.Int64) error {
		return receivers[q].run(st, msgs, stop, lastAck)
	})
	for _, r := range receivers {
		res.FlowWaits += r.rc.waits
	}
	return res, nil
}
