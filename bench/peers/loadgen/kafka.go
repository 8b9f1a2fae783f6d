package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka: a ProduceRequest (v9, acks=1) with one record batch of `batch` records for partition
// `conn` of the topic, encoded once with kmsg; only the correlation id (int32 at byte 8: after
// length, api key and version) changes. Answers come in request order on a connection.

const produceVersion = 9

func recordBatch(n, size int) []byte {
	var recs []byte
	value := make([]byte, size)
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: value}
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1) // Length 0 took one varint byte
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: int32(n), Records: recs,
	}
	enc := b.AppendTo(nil)
	binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12)) // Length: what follows it
	crc := crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(enc[17:], crc)
	return enc
}

type kafkaCodec struct {
	buf []byte
}

func newKafkaProduce(p Params, conn int) *kafkaCodec {
	req := kmsg.NewPtrProduceRequest()
	req.Version = produceVersion
	req.Acks = 1
	req.TimeoutMillis = 30000
	part := kmsg.NewProduceRequestTopicPartition()
	part.Partition = int32(conn)
	part.Records = recordBatch(p.Batch, p.Size)
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = p.Topic
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("peersgen"))
	return &kafkaCodec{buf: f.AppendRequest(nil, req, 0)}
}

func (k *kafkaCodec) Handshake(net.Conn) error { return nil }

func (k *kafkaCodec) Frame(id uint32) []byte {
	binary.BigEndian.PutUint32(k.buf[8:], id)
	return k.buf
}

func uvarint(b []byte) (uint64, int) { return binary.Uvarint(b) }

// produceError reads the first partition's error code of a flexible ProduceResponse body (after
// the correlation id): header tags, topics array, topic name, partitions array, index, error.
func produceError(b []byte) int16 {
	pos := 1 // response header v1: empty tagged fields
	_, n := uvarint(b[pos:])
	pos += n
	l, n := uvarint(b[pos:])
	pos += n + int(l) - 1
	_, n = uvarint(b[pos:])
	pos += n + 4
	if pos+2 > len(b) {
		return -1
	}
	return int16(binary.BigEndian.Uint16(b[pos:]))
}

func (k *kafkaCodec) Parse(buf []byte, _ net.Conn, done func(int64, bool, string)) (int, error) {
	used := 0
	for len(buf)-used >= 4 {
		size := int(binary.BigEndian.Uint32(buf[used:])) + 4
		if len(buf)-used < size {
			break
		}
		frame := buf[used+4 : used+size]
		corr := int64(binary.BigEndian.Uint32(frame))
		code := produceError(frame[4:])
		why := ""
		if code != 0 {
			why = fmt.Sprintf("kafka error code %d", code)
		}
		done(corr, code == 0, why)
		used += size
	}
	return used, nil
}

func kafkaSetup(p Params) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, t := range []string{p.Topic, p.Topic + "-e2e"} {
		resp, err := adm.CreateTopic(ctx, int32(p.Conns), 1, nil, t)
		if err != nil && resp.Err == nil {
			return err
		}
	}
	for { // until every partition has a leader
		md, err := adm.Metadata(ctx, p.Topic, p.Topic+"-e2e")
		if err == nil {
			ready := true
			for _, t := range md.Topics {
				if t.Err != nil || len(t.Partitions) != p.Conns {
					ready = false
				}
				for _, pt := range t.Partitions {
					if pt.Leader < 0 || pt.Err != nil {
						ready = false
					}
				}
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka topics not ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kafkaConsume reads the whole topic from the start with franz-go's consumer (its fetch sizes
// are Kafka's defaults), until `count` records or no record for a second.
func kafkaConsume(p Params) (*Result, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.ConsumeTopics(p.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var win Window
	win.Start(p.ServerPID)
	res := &Result{}
	deadline := time.Now().Add(time.Duration(p.Seconds * float64(time.Second)))
	last := time.Now()
	var end Window // the window up to the last record: an idle poll at the end is not consuming
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := int64(fs.NumRecords())
		if n > 0 {
			res.Messages += n
			res.Requests++
			end = win
			end.Stop()
		} else if res.Messages > 0 && time.Since(last) > time.Second {
			break
		}
		fs.EachError(func(_ string, _ int32, e error) {
			if e != context.DeadlineExceeded {
				res.Errors++
				res.FirstError = e.Error()
			}
		})
		last = time.Now()
	}
	if !end.finished {
		end = win
		end.Stop()
	}
	end.fill(res)
	return res, nil
}

// kafkaE2E: franz-go's producer (acks=1, linger 0, idempotence off as acks=1 requires) paced at
// `rate`, a franz-go consumer of the same topic; latency = receive - send.
func kafkaE2E(p Params) (*Result, error) {
	topic := p.Topic + "-e2e"
	cons, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	log := &latencyLog{}
	var stop atomic.Bool
	go func() {
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			fs := cons.PollFetches(ctx)
			cancel()
			now := nowNs()
			fs.EachRecord(func(r *kgo.Record) { log.add(r.Value, now) })
		}
	}()
	// the consumer has its assignment and end offsets before the clock starts
	warm := &kgo.Record{Topic: topic, Value: make([]byte, p.Size)}
	if err := prod.ProduceSync(context.Background(), warm).FirstErr(); err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	var answers tally
	var win Window
	win.Start(p.ServerPID)
	sent := paced(p.Rate, p.Seconds, func(int64) {
		v := make([]byte, p.Size)
		binary.BigEndian.PutUint64(v, uint64(nowNs()))
		prod.Produce(context.Background(), &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				answers.fail(err.Error())
			} else {
				answers.ok.Add(1)
			}
		})
	})
	win.Stop()
	log.await(sent, p.Seconds)
	stop.Store(true)
	return log.result(sent, &answers, &win), nil
}
