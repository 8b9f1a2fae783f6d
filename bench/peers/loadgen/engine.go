package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ConnCodec builds the requests of one connection and reads its answers.
type ConnCodec interface {
	// Handshake runs once after connecting (NATS's CONNECT; nothing for the others).
	Handshake(c net.Conn) error
	// Frame is the request with id patched in; valid until the next call.
	Frame(id uint32) []byte
	// Parse reads the complete answers at the start of buf, calling done for each with its id
	// (-1: answers come in request order) and whether it succeeded; returns the bytes used.
	Parse(buf []byte, c net.Conn, done func(id int64, ok bool, why string)) (int, error)
}

var base = time.Now()

func nowNs() int64 { return int64(time.Since(base)) }

type connStats struct {
	requests, errors int64
	firstErr         string
	lat              []uint32
}

// produce runs the closed-loop phase: each connection keeps `window` requests in flight, written
// `group` at a time (one write each), and writes the next as soon as an answer (or, with
// groups, the whole group's answers) came back.
func produce(p Params) (*Result, error) {
	mk, batch, err := codecFor(p)
	if err != nil {
		return nil, err
	}
	if p.Group < 1 || p.Window%p.Group != 0 {
		return nil, fmt.Errorf("window %d is not a multiple of group %d", p.Window, p.Group)
	}
	var measuring, stopping atomic.Bool
	stats := make([]connStats, p.Conns)
	conns := make([]net.Conn, p.Conns)
	for i := range conns {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		conns[i] = c
	}
	codecs := make([]ConnCodec, p.Conns)
	for i := range codecs {
		codecs[i] = mk(i)
		if err := codecs[i].Handshake(conns[i]); err != nil {
			return nil, err
		}
	}
	if p.Count > 0 {
		measuring.Store(true)
	}
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			driveConn(conns[i], codecs[i], p, &stats[i], &measuring, &stopping)
		}(i)
	}
	var win Window
	if p.Count > 0 { // a fill: every request counted, each connection stops at its share
		win.Start(p.ServerPID)
		wg.Wait()
		win.Stop()
		for _, c := range conns {
			_ = c.Close()
		}
	} else {
		timedWindow(p, &win, &measuring, &stopping)
		time.Sleep(200 * time.Millisecond) // answers in flight arrive (uncounted) before the close
		for _, c := range conns {
			_ = c.Close()
		}
		wg.Wait()
	}
	res, lat := collect(stats)
	res.Messages = res.Requests * int64(batch)
	win.fill(res)
	percentiles(res, lat)
	return res, nil
}

// collect sums the connections' counts into a Result and gathers their latencies.
func collect(stats []connStats) (*Result, []uint32) {
	res := &Result{}
	var lat []uint32
	for i := range stats {
		s := &stats[i]
		res.Requests += s.requests
		res.Errors += s.errors
		if res.FirstError == "" {
			res.FirstError = s.firstErr
		}
		lat = append(lat, s.lat...)
	}
	return res, lat
}

func driveConn(c net.Conn, cc ConnCodec, p Params, st *connStats, measuring, stopping *atomic.Bool) {
	w, g := uint32(p.Window), p.Group
	quota := int64(p.Count / p.Conns) // requests of this connection in a fill (0: timed)
	var issued, answered int64
	sent := make([]int64, w)
	gen := make([]uint32, w)
	left := make([]int, int(w)/g) // answers a group still waits for
	fifo := make([]uint32, 0, w)
	out := make([]byte, 0, 64<<10)
	write := func(first uint32, n int) bool {
		if quota > 0 && issued >= quota {
			return true
		}
		issued += int64(n)
		out = out[:0]
		t := nowNs()
		for s := first; s < first+uint32(n); s++ {
			out = append(out, cc.Frame(gen[s]*w+s)...)
			sent[s] = t
			fifo = append(fifo, s)
		}
		_, err := c.Write(out)
		return err == nil
	}
	for first := 0; first < int(w); first += g {
		left[first/g] = g
		if !write(uint32(first), g) {
			return
		}
	}
	buf := make([]byte, 1<<20)
	have := 0
	done := func(id int64, ok bool, why string) {
		var s uint32
		if id < 0 {
			s, fifo = fifo[0], fifo[1:]
		} else {
			s = uint32(id) % w
			for k, f := range fifo { // keep the FIFO consistent (it is short)
				if f == s {
					fifo = append(fifo[:k], fifo[k+1:]...)
					break
				}
			}
		}
		if measuring.Load() {
			st.requests++
			st.lat = append(st.lat, uint32((nowNs()-sent[s])/1000))
			if !ok {
				st.errors++
				if st.firstErr == "" {
					st.firstErr = why
				}
			}
		}
		gen[s]++
		answered++
		if stopping.Load() {
			return
		}
		if g == 1 {
			write(s, 1)
			return
		}
		grp := int(s) / g
		left[grp]--
		if left[grp] == 0 {
			left[grp] = g
			write(uint32(grp*g), g)
		}
	}
	for {
		if have == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		n, err := c.Read(buf[have:])
		if err != nil {
			return
		}
		have += n
		used, perr := cc.Parse(buf[:have], c, done)
		if perr != nil {
			if st.firstErr == "" {
				st.firstErr = perr.Error()
			}
			st.errors++
			return
		}
		copy(buf, buf[used:have])
		have -= used
		if quota > 0 && answered >= quota {
			return
		}
	}
}

func codecFor(p Params) (func(i int) ConnCodec, int, error) {
	switch p.Proto {
	case "remoting":
		fr, err := loadFrames(p.Frames)
		if err != nil {
			return nil, 0, err
		}
		return func(i int) ConnCodec { return newRemoting(fr.Frames[i%len(fr.Frames)]) }, fr.Batch, nil
	case "kafka":
		return func(i int) ConnCodec { return newKafkaProduce(p, i) }, p.Batch, nil
	case "nats":
		return func(i int) ConnCodec { return newNatsPub(p, i) }, 1, nil
	case "redis":
		return func(i int) ConnCodec { return newRedisXadd(p, i) }, 1, nil
	}
	return nil, 0, fmt.Errorf("unknown proto %q", p.Proto)
}
