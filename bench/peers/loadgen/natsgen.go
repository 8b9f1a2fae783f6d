package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// NATS JetStream: a publish is `PUB <topic>.<conn> _INBOX.<conn>.<id> <size>` + body; JetStream
// answers on the reply subject with {"stream":..,"seq":..} (or {"error":..}), so the id is read
// back from the answer's subject (10 digits, 1e9 + n). The connection subscribes its inbox once.

type natsCodec struct {
	conn  int
	buf   []byte
	idPos int
	body  int
}

func newNatsPub(p Params, conn int) *natsCodec {
	head := fmt.Sprintf("PUB %s.%d _INBOX.%d.%d %d\r\n", p.Topic, conn, conn, opaqueBase, p.Size)
	buf := append([]byte(head), make([]byte, p.Size)...)
	buf = append(buf, '\r', '\n')
	idPos := bytes.Index(buf, []byte(strconv.Itoa(opaqueBase)+" "))
	return &natsCodec{conn: conn, buf: buf, idPos: idPos, body: len(head)}
}

func natsHello(c net.Conn, conn int, subscribe bool) error {
	cmd := `CONNECT {"verbose":false,"pedantic":false,"headers":false,"name":"peersgen"}` + "\r\n"
	if subscribe {
		cmd += fmt.Sprintf("SUB _INBOX.%d.* 1\r\n", conn)
	}
	cmd += "PING\r\n"
	if _, err := c.Write([]byte(cmd)); err != nil {
		return err
	}
	var got []byte
	tmp := make([]byte, 4096)
	for !bytes.Contains(got, []byte("PONG\r\n")) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(tmp)
		if err != nil {
			return err
		}
		got = append(got, tmp[:n]...)
		if bytes.Contains(got, []byte("-ERR")) {
			return fmt.Errorf("nats: %s", got)
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return nil
}

func (n *natsCodec) Handshake(c net.Conn) error {
	return natsHello(c, n.conn, true)
}

func (n *natsCodec) Frame(id uint32) []byte {
	putDigits(n.buf[n.idPos:n.idPos+10], opaqueBase+uint64(id)%opaqueBase)
	return n.buf
}

func (n *natsCodec) FrameAt(id uint32, head int64) []byte {
	binary.BigEndian.PutUint64(n.buf[n.body:], uint64(head))
	return n.Frame(id)
}

func (n *natsCodec) Parse(buf []byte, c net.Conn, done func(int64, bool, string)) (int, error) {
	used := 0
	for {
		eol := bytes.Index(buf[used:], []byte("\r\n"))
		if eol < 0 {
			return used, nil
		}
		line := buf[used : used+eol]
		switch {
		case bytes.HasPrefix(line, []byte("MSG ")):
			f := bytes.Fields(line)
			size, _ := strconv.Atoi(string(f[len(f)-1]))
			end := used + eol + 2 + size + 2
			if end > len(buf) {
				return used, nil
			}
			payload := buf[used+eol+2 : used+eol+2+size]
			subj := f[1]
			id, _ := strconv.ParseInt(string(subj[len(subj)-10:]), 10, 64)
			if bytes.Contains(payload, []byte(`"error"`)) {
				done(id-opaqueBase, false, string(payload))
			} else {
				done(id-opaqueBase, true, "")
			}
			used = end
			continue
		case bytes.Equal(line, []byte("PING")):
			if _, err := c.Write([]byte("PONG\r\n")); err != nil {
				return used, err
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			return used, errors.New(string(line))
		}
		used += eol + 2
	}
}

func natsConnect(p Params) (*nats.Conn, nats.JetStreamContext, error) {
	nc, err := nats.Connect("nats://"+p.Addr, nats.Name("peersgen"))
	if err != nil {
		return nil, nil, err
	}
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(p.Window))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// natsSetup creates the file-storage streams `<topic>` (subjects <topic>.>) and `<topic>-e2e`.
func natsSetup(p Params) error {
	nc, js, err := natsConnect(p)
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, name := range []string{p.Topic, p.Topic + "-e2e"} {
		if _, err := js.AddStream(&nats.StreamConfig{
			Name: name, Subjects: []string{name + ".>"}, Storage: nats.FileStorage,
		}); err != nil {
			return err
		}
	}
	return nil
}

// natsConsume reads each subject <topic>.<q> from the start with a pull consumer (no acks),
// fetching 32 at a time, one connection per subject.
func natsConsume(p Params) (*Result, error) {
	var total atomic.Int64
	var failures tally
	type sub struct {
		nc   *nats.Conn
		s    *nats.Subscription
		want uint64
	}
	subs := make([]sub, p.Conns)
	for q := range subs {
		nc, js, err := natsConnect(p)
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		s, err := js.PullSubscribe(fmt.Sprintf("%s.%d", p.Topic, q), "", nats.AckNone(),
			nats.DeliverAll(), nats.BindStream(p.Topic))
		if err != nil {
			return nil, err
		}
		ci, err := s.ConsumerInfo()
		if err != nil {
			return nil, err
		}
		subs[q] = sub{nc, s, ci.NumPending}
	}
	deadline := time.Now().Add(time.Duration(p.Seconds * float64(time.Second)))
	var win Window
	win.Start(p.ServerPID)
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func(s sub) {
			defer wg.Done()
			var got uint64
			for got < s.want && time.Now().Before(deadline) {
				msgs, err := s.s.Fetch(32, nats.MaxWait(2*time.Second))
				got += uint64(len(msgs))
				if err != nil && !errors.Is(err, nats.ErrTimeout) {
					failures.fail(err.Error())
					return
				}
			}
			total.Add(int64(got))
		}(s)
	}
	wg.Wait()
	win.Stop()
	return countResult(total.Load(), &failures, &win), nil
}

// natsE2E: raw PUBs paced at `rate` over `conns` connections (acks read back), a push consumer
// (no acks, new messages only) per subject on connections of its own; latency = receive - send.
func natsE2E(p Params) (*Result, error) {
	topic := p.Topic + "-e2e"
	log := &latencyLog{}
	for q := 0; q < p.Conns; q++ {
		nc, js, err := natsConnect(p)
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		if _, err := js.Subscribe(fmt.Sprintf("%s.%d", topic, q), func(m *nats.Msg) {
			log.add(m.Data, nowNs())
		}, nats.AckNone(), nats.DeliverNew(), nats.BindStream(topic)); err != nil {
			return nil, err
		}
	}
	pp := p
	pp.Topic = topic
	return e2eSends(p, log, nil, func(i int) *natsCodec { return newNatsPub(pp, i) },
		func(cc *natsCodec, k int64) []byte { return cc.FrameAt(uint32(k), nowNs()) })
}
