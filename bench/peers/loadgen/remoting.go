package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RocketMQ remoting: a frame is int32 length, int32 (serialize type << 24 | header length), the
// header (JSON here, as a Java client sends), the body. The harness encodes each request once
// with rocketlite's encoder; the opaque is 10 ASCII digits (1e9 + n) at OpaquePos, a pull's
// queueOffset 20 zero-padded digits at OffsetPos, and the body starts at BodyPos.

const opaqueBase = 1_000_000_000

type Template struct {
	Data      []byte `json:"data"`
	OpaquePos int    `json:"opaque_pos"`
	BodyPos   int    `json:"body_pos"`
	OffsetPos int    `json:"offset_pos"`
}

type FrameSet struct {
	Batch  int        `json:"batch"`
	Frames []Template `json:"frames"`
	Pulls  []Template `json:"pulls"`
}

func loadFrames(path string) (*FrameSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var fs FrameSet
	if err := json.Unmarshal(b, &fs); err != nil {
		return nil, err
	}
	if fs.Batch < 1 {
		fs.Batch = 1
	}
	return &fs, nil
}

type remotingCodec struct {
	t   Template
	buf []byte
}

func newRemoting(t Template) *remotingCodec {
	return &remotingCodec{t: t, buf: append([]byte(nil), t.Data...)}
}

func (r *remotingCodec) Handshake(net.Conn) error { return nil }

func putDigits(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

func (r *remotingCodec) Frame(id uint32) []byte {
	putDigits(r.buf[r.t.OpaquePos:r.t.OpaquePos+10], opaqueBase+uint64(id)%opaqueBase)
	return r.buf
}

func (r *remotingCodec) FrameAt(id uint32, head int64) []byte {
	binary.BigEndian.PutUint64(r.buf[r.t.BodyPos:], uint64(head))
	return r.Frame(id)
}

func (r *remotingCodec) FrameOffset(id uint32, offset int64) []byte {
	putDigits(r.buf[r.t.OffsetPos:r.t.OffsetPos+20], uint64(offset))
	return r.Frame(id)
}

// jsonInt finds `"key":` (or `"key":"`) in a JSON header and reads the integer after it.
func jsonInt(h []byte, key string) (int64, bool) {
	k := []byte(`"` + key + `":`)
	i := bytes.Index(h, k)
	if i < 0 {
		return 0, false
	}
	i += len(k)
	if i < len(h) && h[i] == '"' {
		i++
	}
	j := i
	for j < len(h) && (h[j] == '-' || (h[j] >= '0' && h[j] <= '9')) {
		j++
	}
	v, err := strconv.ParseInt(string(h[i:j]), 10, 64)
	return v, err == nil
}

func jsonRemark(h []byte) string {
	k := []byte(`"remark":"`)
	i := bytes.Index(h, k)
	if i < 0 {
		return ""
	}
	i += len(k)
	j := bytes.IndexByte(h[i:], '"')
	if j < 0 {
		return string(h[i:])
	}
	return string(h[i : i+j])
}

// splitFrame returns the header and body of the frame at the start of buf, and its size
// (0: incomplete).
func splitFrame(buf []byte) (header, body []byte, size int) {
	if len(buf) < 8 {
		return nil, nil, 0
	}
	total := int(binary.BigEndian.Uint32(buf)) + 4
	if len(buf) < total {
		return nil, nil, 0
	}
	hl := int(binary.BigEndian.Uint32(buf[4:]) & 0xFFFFFF)
	return buf[8 : 8+hl], buf[8+hl : total], total
}

func (r *remotingCodec) Parse(buf []byte, _ net.Conn, done func(int64, bool, string)) (int, error) {
	used := 0
	for {
		h, _, size := splitFrame(buf[used:])
		if size == 0 {
			return used, nil
		}
		code, ok1 := jsonInt(h, "code")
		opaque, ok2 := jsonInt(h, "opaque")
		if !ok1 || !ok2 {
			return used, fmt.Errorf("answer without code/opaque: %.200s", h)
		}
		why := ""
		if code != 0 {
			why = fmt.Sprintf("code %d: %s", code, jsonRemark(h))
		}
		done(opaque-opaqueBase, code == 0, why)
		used += size
	}
}

// Stored records (RocketMQ's commit-log layout) in a pull answer's body.
const (
	sysflagPos    = 36
	bornHostV6    = 0x10
	storeHostV6   = 0x20
	bodyLenPosV4  = 84
	ipv6HostExtra = 12
)

// walkRecords calls fn with the body of each record of a pull answer's body.
func walkRecords(body []byte, fn func(msgBody []byte)) (int, error) {
	n := 0
	for pos := 0; pos < len(body); {
		if len(body)-pos < bodyLenPosV4+4 {
			return n, fmt.Errorf("short record at %d", pos)
		}
		total := int(binary.BigEndian.Uint32(body[pos:]))
		if total <= 0 || pos+total > len(body) {
			return n, fmt.Errorf("bad record size %d", total)
		}
		if fn != nil {
			flag := binary.BigEndian.Uint32(body[pos+sysflagPos:])
			at := pos + bodyLenPosV4
			if flag&bornHostV6 != 0 {
				at += ipv6HostExtra
			}
			if flag&storeHostV6 != 0 {
				at += ipv6HostExtra
			}
			bl := int(binary.BigEndian.Uint32(body[at:]))
			fn(body[at+4 : at+4+bl])
		}
		n++
		pos += total
	}
	return n, nil
}

// readFrame reads one whole frame.
func readFrame(rd *bufio.Reader) (header, body []byte, err error) {
	var pre [8]byte
	if _, err = io.ReadFull(rd, pre[:]); err != nil {
		return nil, nil, err
	}
	total := int(binary.BigEndian.Uint32(pre[:]))
	hl := int(binary.BigEndian.Uint32(pre[4:]) & 0xFFFFFF)
	rest := make([]byte, total-4)
	if _, err = io.ReadFull(rd, rest); err != nil {
		return nil, nil, err
	}
	return rest[:hl], rest[hl:], nil
}

const (
	codeSuccess      = 0
	codePullNotFound = 19
)

// pullLoop pulls one queue from offset 0, one pull in flight, until onBody says stop (or, with
// untilEnd, until the broker has nothing more). Returns messages seen.
func pullLoop(addr string, t Template, untilEnd bool, stop *atomic.Bool, onBody func([]byte) error) (int64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rd := bufio.NewReaderSize(c, 1<<20)
	cc := newRemoting(t)
	var offset, msgs int64
	for id := uint32(0); !stop.Load(); id++ {
		if _, err := c.Write(cc.FrameOffset(id, offset)); err != nil {
			return msgs, err
		}
		h, body, err := readFrame(rd)
		if err != nil {
			if stop.Load() {
				return msgs, nil
			}
			return msgs, err
		}
		code, _ := jsonInt(h, "code")
		next, hasNext := jsonInt(h, "nextBeginOffset")
		switch {
		case code == codeSuccess:
			n, err := walkRecords(body, nil)
			if err != nil {
				return msgs, err
			}
			if onBody != nil {
				if err := onBody(body); err != nil {
					return msgs, err
				}
			}
			msgs += int64(n)
		case code == codePullNotFound && untilEnd:
			return msgs, nil
		case code == codePullNotFound || code == 20 || code == 21:
		case !untilEnd: // e2e: the topic is created by its first send; ask again
			time.Sleep(10 * time.Millisecond)
		default:
			return msgs, fmt.Errorf("pull: code %d %s", code, jsonRemark(h))
		}
		if hasNext {
			offset = next
		}
	}
	return msgs, nil
}

// remotingConsume reads every queue from offset 0 to its end, one PULL_MESSAGE in flight each.
func remotingConsume(p Params) (*Result, error) {
	fs, err := loadFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	var stop atomic.Bool
	var total atomic.Int64
	errs := make(chan error, len(fs.Pulls))
	var win Window
	win.Start(p.ServerPID)
	var wg sync.WaitGroup
	for _, t := range fs.Pulls {
		wg.Add(1)
		go func(t Template) {
			defer wg.Done()
			n, err := pullLoop(p.Addr, t, true, &stop, nil)
			total.Add(n)
			if err != nil {
				errs <- err
			}
		}(t)
	}
	timer := time.AfterFunc(time.Duration(p.Seconds*float64(time.Second)), func() { stop.Store(true) })
	wg.Wait()
	timer.Stop()
	win.Stop()
	res := &Result{Messages: total.Load()}
	res.Requests = res.Messages
	close(errs)
	for e := range errs {
		res.Errors++
		res.FirstError = e.Error()
	}
	win.fill(res)
	return res, nil
}

// remotingE2E: single sends paced at `rate` over `conns` connections (send time in the body),
// consumers long-polling (PULL_MESSAGE with SUSPEND) each queue; latency = receive - send.
func remotingE2E(p Params) (*Result, error) {
	fs, err := loadFrames(p.Frames)
	if err != nil {
		return nil, err
	}
	log := &latencyLog{}
	var stop atomic.Bool
	var cwg sync.WaitGroup
	for _, t := range fs.Pulls {
		cwg.Add(1)
		go func(t Template) {
			defer cwg.Done()
			_, _ = pullLoop(p.Addr, t, false, &stop, func(body []byte) error {
				now := nowNs()
				_, err := walkRecords(body, func(b []byte) { log.add(b, now) })
				return err
			})
		}(t)
	}
	return e2eSends(p, log, &stop, func(i int) *remotingCodec { return newRemoting(fs.Frames[i%len(fs.Frames)]) },
		func(cc *remotingCodec, k int64) []byte { return cc.FrameAt(uint32(k), nowNs()) })
}
