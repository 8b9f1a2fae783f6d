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
// topic) with those entries appended: no protobuf object is made. Frames are split at the
// server's SETTINGS_MAX_FRAME_SIZE, and a call is written only when the server's connection
// window and a new stream's window hold it (otherwise it waits for a WINDOW_UPDATE).

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// lengthPrefixed is msg as one gRPC message (not compressed).
func lengthPrefixed(msg []byte) []byte {
	n := len(msg)
	out := make([]byte, 5, 5+n)
	out[1], out[2], out[3], out[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return append(out, msg...)
}

// rawReceiver is one connection's receive + ack loop.
type rawReceiver struct {
	rc               *rawConn
	recvBlock, recv  []byte // ReceiveMessage's header block and length-prefixed request
	ackBlock, prefix []byte // AckMessage's header block and the request's prefix (no entries)
	pending          []byte // a call's message waiting for the server's window (0 or 1 call)
	pendingBlock     []byte
	pendingID        uint32
	recvID, ackID    uint32
	started          int64  // when the current receive was written
	batch            int    // messages of the receive being acked
	spare, ackBuf    []byte // reused: an answer's bytes, the AckMessage request
}

// call writes HEADERS and the DATA of one call on a new stream (DATA split at the server's
// maximum frame size), or keeps it until the server's windows hold it; returns the stream id.
func (r *rawReceiver) call(block, msg []byte) (uint32, error) {
	rc := r.rc
	if int64(len(msg)) > rc.peerInit {
		return 0, fmt.Errorf("a request of %d bytes exceeds the server's stream window %d", len(msg), rc.peerInit)
	}
	id := rc.next
	rc.next += 2
	rc.streams[id] = &rawStream{resp: r.spare[:0]} // one call at a time: one answer buffer
	if rc.sendConn < int64(len(msg)) {
		rc.waits++
		r.pending, r.pendingBlock, r.pendingID = msg, block, id
		return id, nil
	}
	return id, r.write(id, block, msg)
}

func (r *rawReceiver) write(id uint32, block, msg []byte) error {
	rc := r.rc
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
	rc.streams[id].sent = nowNs()
	return rc.flush()
}

// receiveAnswer reads a ReceiveMessage answer stream's messages into an AckMessageRequest as one
// length-prefixed gRPC message (in buf: the prefix and an entry per Message), and says how many
// Messages came, or why the answer is not one.
func receiveAnswer(buf, prefix, resp []byte) ([]byte, int, string) {
	ack := append(append(buf[:0], 0, 0, 0, 0, 0), prefix...)
	n := 0
	for len(resp) > 0 {
		if len(resp) < 5 {
			return nil, 0, fmt.Sprintf("a gRPC message cut short (%d bytes)", len(resp))
		}
		size := int(resp[1])<<24 | int(resp[2])<<16 | int(resp[3])<<8 | int(resp[4])
		if resp[0] != 0 || len(resp) < 5+size {
			return nil, 0, fmt.Sprintf("bad gRPC message prefix (flag %d, length %d of %d)", resp[0], size, len(resp)-5)
		}
		item := resp[5 : 5+size]
		resp = resp[5+size:]
		if m, _, ok := field(item, 2); ok {
			ack = appendAckEntry(ack, m)
			n++
		} else if st, _, ok := field(item, 1); ok {
			if _, code, _ := field(st, 1); code != grpcOK && code != grpcNotFound {
				msg, _, _ := field(st, 2)
				return nil, 0, fmt.Sprintf("receive status %d: %s", code, msg)
			}
		}
	}
	size := len(ack) - 5
	ack[1], ack[2], ack[3], ack[4] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	return ack, n, ""
}

// run receives and acks until a receive finds nothing or *stop; counts into st and msgs.
func (r *rawReceiver) run(st *connStats, msgs *int64, stop *atomic.Bool, lastAck *atomic.Int64) error {
	rc := r.rc
	var err error
	r.started = nowNs()
	if r.recvID, err = r.call(r.recvBlock, r.recv); err != nil {
		return err
	}
	for {
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
			switch f.StreamID {
			case r.recvID:
				if why := grpcStatusOK(f.Fields); why != "" {
					return fmt.Errorf("receive: %s", why)
				}
				ack, n, why := receiveAnswer(r.ackBuf, r.prefix, s.resp)
				if why != "" {
					return fmt.Errorf("receive: %s", why)
				}
				if n == 0 {
					return nil // drained
				}
				r.batch, r.ackBuf = n, ack
				if r.ackID, err = r.call(r.ackBlock, ack); err != nil {
					return err
				}
			case r.ackID:
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
				r.started = nowNs()
				if r.recvID, err = r.call(r.recvBlock, r.recv); err != nil {
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
		if r.pending != nil && rc.sendConn >= int64(len(r.pending)) {
			msg, block := r.pending, r.pendingBlock
			r.pending, r.pendingBlock = nil, nil
			if err := r.write(r.pendingID, block, msg); err != nil {
				return err
			}
		}
		if err := rc.flush(); err != nil { // acks and window updates of this frame
			return err
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

// grpcRawConsume: grpcConsume's phase (one receiver per prebuilt receive request, each on a
// connection of its own) from prebuilt HTTP/2 frames; the same counts and window.
func grpcRawConsume(p Params) (*Result, error) {
	f, _, recvs, ackPrefix, err := loadGrpcFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	recvBlock := rawHeaderBlock(p.Addr, "ReceiveMessage", f.Metadata)
	ackBlock := rawHeaderBlock(p.Addr, "AckMessage", f.Metadata)
	receivers := make([]*rawReceiver, len(recvs))
	for q, req := range recvs {
		rc, err := dialRaw(p.Addr, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", q, err)
		}
		defer rc.c.Close()
		receivers[q] = &rawReceiver{rc: rc, recvBlock: recvBlock, recv: lengthPrefixed(req),
			ackBlock: ackBlock, prefix: ackPrefix}
	}
	var stop atomic.Bool
	var lastAck atomic.Int64
	stats := make([]connStats, len(recvs))
	msgs := make([]int64, len(recvs))
	var win Window
	win.Start(p.ServerPID)
	var wg sync.WaitGroup
	for q, r := range receivers {
		wg.Add(1)
		go func(q int, r *rawReceiver) {
			defer wg.Done()
			if err := r.run(&stats[q], &msgs[q], &stop, &lastAck); err != nil {
				stats[q].errors++
				stats[q].firstErr = err.Error()
			}
		}(q, r)
	}
	win = drainWindow(p, win, &stop, &lastAck, wg.Wait)
	res, lat := collect(stats)
	for q, n := range msgs {
		res.Messages += n
		res.FlowWaits += receivers[q].rc.waits
	}
	win.fill(res)
	percentiles(res, lat)
	return res, nil
}
