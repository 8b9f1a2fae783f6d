package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Redis Streams: `XADD <topic>:<conn> * d <body>`, answered in order with the new entry's id
// (a bulk string) or an error.

type redisCodec struct {
	buf  []byte
	body int
}

func resp(args ...[]byte) []byte {
	out := []byte(fmt.Sprintf("*%d\r\n", len(args)))
	for _, a := range args {
		out = append(out, fmt.Sprintf("$%d\r\n", len(a))...)
		out = append(out, a...)
		out = append(out, '\r', '\n')
	}
	return out
}

func newRedisXadd(p Params, conn int) *redisCodec {
	key := []byte(fmt.Sprintf("%s:%d", p.Topic, conn))
	head := resp([]byte("XADD"), key, []byte("*"), []byte("d"))
	head[1] = '5'
	head = append(head, fmt.Sprintf("$%d\r\n", p.Size)...)
	buf := append(head, make([]byte, p.Size)...)
	return &redisCodec{buf: append(buf, '\r', '\n'), body: len(head)}
}

func (r *redisCodec) Handshake(net.Conn) error { return nil }
func (r *redisCodec) Frame(uint32) []byte      { return r.buf }

func (r *redisCodec) FrameAt(head int64) []byte {
	binary.BigEndian.PutUint64(r.buf[r.body:], uint64(head))
	return r.buf
}

func (r *redisCodec) Parse(buf []byte, _ net.Conn, done func(int64, bool, string)) (int, error) {
	used := 0
	for {
		eol := bytes.Index(buf[used:], []byte("\r\n"))
		if eol < 0 {
			return used, nil
		}
		line := buf[used : used+eol]
		switch line[0] {
		case '$':
			size, _ := strconv.Atoi(string(line[1:]))
			end := used + eol + 2
			if size >= 0 {
				end += size + 2
			}
			if end > len(buf) {
				return used, nil
			}
			done(-1, true, "")
			used = end
		case '-':
			done(-1, false, string(line))
			used += eol + 2
		case '+', ':':
			done(-1, true, "")
			used += eol + 2
		default:
			return used, fmt.Errorf("unexpected redis answer %q", line)
		}
	}
}

// readReply reads one RESP2 reply: []byte, int64, string (simple), error, nil or []any.
func readReply(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-2]
	switch line[0] {
	case '+':
		return string(line[1:]), nil
	case '-':
		return errors.New(string(line[1:])), nil
	case ':':
		return strconv.ParseInt(string(line[1:]), 10, 64)
	case '$':
		n, _ := strconv.Atoi(string(line[1:]))
		if n < 0 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		return b[:n], nil
	case '*':
		n, _ := strconv.Atoi(string(line[1:]))
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(rd); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("bad RESP %q", line)
}

// entries walks XRANGE's [[id, [field, value, ...]], ...] (or one XREAD stream's entries),
// calling fn with each value; returns the last id.
func entries(list []any, fn func(v []byte)) string {
	last := ""
	for _, e := range list {
		pair := e.([]any)
		last = string(pair[0].([]byte))
		fields := pair[1].([]any)
		if fn != nil && len(fields) >= 2 {
			fn(fields[1].([]byte))
		}
	}
	return last
}

// redisConsume reads every stream <topic>:<q> from the start with XRANGE ... COUNT 32, one in
// flight per stream (one connection each).
func redisConsume(p Params) (*Result, error) {
	var total atomic.Int64
	var failures tally
	deadline := time.Now().Add(time.Duration(p.Seconds * float64(time.Second)))
	var win Window
	win.Start(p.ServerPID)
	var wg sync.WaitGroup
	for q := 0; q < p.Conns; q++ {
		wg.Add(1)
		go func(q int) {
			defer wg.Done()
			c, err := net.Dial("tcp", p.Addr)
			if err != nil {
				failures.fail(err.Error())
				return
			}
			defer c.Close()
			rd := bufio.NewReaderSize(c, 1<<20)
			key := []byte(fmt.Sprintf("%s:%d", p.Topic, q))
			start := "-"
			for time.Now().Before(deadline) {
				if _, err := c.Write(resp([]byte("XRANGE"), key, []byte(start), []byte("+"),
					[]byte("COUNT"), []byte("32"))); err != nil {
					return
				}
				r, err := readReply(rd)
				if err != nil {
					return
				}
				list, ok := r.([]any)
				if !ok {
					failures.fail(fmt.Sprint(r))
					return
				}
				if len(list) == 0 {
					return
				}
				total.Add(int64(len(list)))
				start = "(" + entries(list, nil)
			}
		}(q)
	}
	wg.Wait()
	win.Stop()
	return countResult(total.Load(), &failures, &win), nil
}

// redisE2E: XADDs paced at `rate` over `conns` connections, an XREAD BLOCK consumer per stream;
// latency = receive - send.
func redisE2E(p Params) (*Result, error) {
	topic := p.Topic + "-e2e"
	log := &latencyLog{}
	var stop atomic.Bool
	for q := 0; q < p.Conns; q++ {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		go func(c net.Conn, key []byte) {
			rd := bufio.NewReaderSize(c, 1<<20)
			last := "$"
			for !stop.Load() {
				if _, err := c.Write(resp([]byte("XREAD"), []byte("COUNT"), []byte("32"), []byte("BLOCK"),
					[]byte("1000"), []byte("STREAMS"), key, []byte(last))); err != nil {
					return
				}
				r, err := readReply(rd)
				if err != nil {
					return
				}
				now := nowNs()
				streams, ok := r.([]any)
				if !ok || len(streams) == 0 {
					continue
				}
				list := streams[0].([]any)[1].([]any)
				last = entries(list, func(v []byte) { log.add(v, now) })
			}
		}(c, []byte(fmt.Sprintf("%s:%d", topic, q)))
	}
	pp := p
	pp.Topic = topic
	return e2eSends(p, log, &stop, func(i int) *redisCodec { return newRedisXadd(pp, i) },
		func(cc *redisCodec, _ int64) []byte { return cc.FrameAt(nowNs()) })
}
