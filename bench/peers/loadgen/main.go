// Command peersgen is the native load generator of bench/peers_bench.py: one program that drives
// rocketlite, the real RocketMQ broker, Kafka, NATS JetStream and Redis with the same load shape
// (C connections, W requests in flight on each, G requests per write), so the servers, not the
// generator, are measured.
//
// Requests are prebuilt frames: encoded once, then only a request id (an opaque, a correlation
// id, a reply subject) and, in the end-to-end phase, the send time in the first 8 bytes of the
// body are patched in at fixed positions. Answers are read for their id and status only. The
// RocketMQ remoting frames come from the harness (rocketlite's own encoder, as a Java client
// sends them); Kafka's are encoded here with franz-go's kmsg, NATS's and Redis's are text.
//
// Each phase prints one JSON object: counts, the measured window, latency percentiles, and the
// CPU seconds of the server process (/proc/<pid>/stat, all threads) and of this process over
// that window, so CPU per message and the saturated process come from the same interval.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Params are the flags every mode shares.
type Params struct {
	Proto     string
	Addr      string
	Conns     int
	Window    int
	Group     int
	Batch     int
	Size      int
	Seconds   float64
	Warmup    float64
	Rate      float64
	Topic     string
	Frames    string
	ServerPID int
	Count     int
	Receivers int
}

// Result is what a phase prints.
type Result struct {
	Mode        string  `json:"mode"`
	Proto       string  `json:"proto"`
	Requests    int64   `json:"requests"`
	Messages    int64   `json:"messages"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"seconds"`
	Rate        float64 `json:"rate"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	Samples     int     `json:"samples"`
	ServerCPU   float64 `json:"server_cpu_s"`
	GenCPU      float64 `json:"gen_cpu_s"`
	MachineBusy float64 `json:"machine_busy_s"`
	Sent        int64   `json:"sent,omitempty"`
	MaxMs       float64 `json:"max_ms,omitempty"`
	SendP50ms   float64 `json:"send_p50_ms,omitempty"`
	SendP99ms   float64 `json:"send_p99_ms,omitempty"`
	ServerWait  float64 `json:"server_wait_s,omitempty"`
	GenWait     float64 `json:"gen_wait_s,omitempty"`
	FlowWaits   int64   `json:"flow_waits,omitempty"` // grpcraw: requests held back by HTTP/2 flow control
	Cancelled   int64   `json:"cancelled,omitempty"`  // grpcraw e2e: parked receives ended by RST_STREAM CANCEL
}

var clkTck = 100.0 // USER_HZ; Linux reports /proc times in 1/100 s on every common build

func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / clkTck
}

// procWait is the time the threads of a process spent runnable but waiting for a CPU (the second
// field of /proc/<pid>/task/*/schedstat, ns), in seconds: what a busy machine costs that process.
func procWait(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			ns += v
		}
	}
	return ns / 1e9
}

// machineBusy is the CPU time (all cores) that was not idle or iowait, from /proc/stat.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line := strings.SplitN(string(b), "\n", 2)[0]
	f := strings.Fields(line)[1:]
	var busy float64
	for i, x := range f {
		v, _ := strconv.ParseFloat(x, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest time is already in user
			busy += v
		}
	}
	return busy / clkTck
}

// Window measures one interval: server CPU, own CPU, machine CPU and wall time.
type Window struct {
	pid               int
	t0                time.Time
	srv0, gen0, mach0 float64
	srvW0, genW0      float64
	Seconds           float64
	Srv, Gen, Mach    float64
	SrvWait, GenWait  float64
	started, finished bool
}

func (w *Window) Start(pid int) {
	w.pid, w.t0 = pid, time.Now()
	w.srv0, w.gen0, w.mach0 = procCPU(pid), procCPU(os.Getpid()), machineBusy()
	w.srvW0, w.genW0 = procWait(pid), procWait(os.Getpid())
	w.started = true
}

func (w *Window) Stop() {
	w.Seconds = time.Since(w.t0).Seconds()
	w.Srv = procCPU(w.pid) - w.srv0
	w.Gen = procCPU(os.Getpid()) - w.gen0
	w.Mach = machineBusy() - w.mach0
	w.SrvWait, w.GenWait = procWait(w.pid)-w.srvW0, procWait(os.Getpid())-w.genW0
	w.finished = true
}

// timedWindow is a timed run's measurement: p.Warmup unmeasured, then the window open (and
// `measuring` set, so the senders count) for p.Seconds; then `stopping` tells the senders to end.
func timedWindow(p Params, win *Window, measuring, stopping *atomic.Bool) {
	time.Sleep(time.Duration(p.Warmup * float64(time.Second)))
	win.Start(p.ServerPID)
	measuring.Store(true)
	time.Sleep(time.Duration(p.Seconds * float64(time.Second)))
	measuring.Store(false)
	win.Stop()
	stopping.Store(true)
}

func (w *Window) fill(r *Result) {
	r.Seconds, r.ServerCPU, r.GenCPU, r.MachineBusy = w.Seconds, w.Srv, w.Gen, w.Mach
	r.ServerWait, r.GenWait = w.SrvWait, w.GenWait
	if w.Seconds > 0 {
		r.Rate = float64(r.Messages) / w.Seconds
	}
}

// percentiles sets p50/p99 (ms) from latencies in microseconds.
func percentiles(r *Result, us []uint32) {
	r.Samples = len(us)
	if len(us) == 0 {
		return
	}
	sort.Slice(us, func(i, j int) bool { return us[i] < us[j] })
	at := func(q float64) float64 { return float64(us[int(q*float64(len(us)-1))]) / 1000 }
	r.P50ms, r.P99ms = at(0.50), at(0.99)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peersgen produce|consume|e2e|setup [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	p := Params{}
	fs.StringVar(&p.Proto, "proto", "remoting", "remoting | grpc | grpcraw (5.x from prebuilt HTTP/2 frames) | kafka | nats | redis")
	fs.StringVar(&p.Addr, "addr", "127.0.0.1:10911", "server address")
	fs.IntVar(&p.Conns, "conns", 16, "connections (one queue / partition / subject / stream each)")
	fs.IntVar(&p.Window, "window", 32, "requests in flight per connection")
	fs.IntVar(&p.Group, "group", 1, "requests written with one write (window/group writes in flight)")
	fs.IntVar(&p.Batch, "batch", 1, "messages per request (remoting: from the frames; kafka: records per batch)")
	fs.IntVar(&p.Size, "size", 1024, "message body bytes")
	fs.Float64Var(&p.Seconds, "seconds", 5, "measured seconds (consume: at most)")
	fs.Float64Var(&p.Warmup, "warmup", 1, "unmeasured seconds before the window")
	fs.Float64Var(&p.Rate, "rate", 20000, "e2e: messages per second, all connections together")
	fs.StringVar(&p.Topic, "topic", "bench", "topic / stream / key prefix")
	fs.StringVar(&p.Frames, "frames", "", "remoting, grpc: JSON file of prebuilt frames / protobuf requests")
	fs.IntVar(&p.ServerPID, "server-pid", 0, "server process whose CPU is measured")
	fs.IntVar(&p.Count, "count", 0, "produce: send this many requests in all, then stop (no warm-up; 0: timed)")
	fs.IntVar(&p.Receivers, "receivers", 4, "e2e -proto grpc, grpcraw: long-polling ReceiveMessage loops")
	profile := fs.String("cpuprofile", "", "write this process's CPU profile (runtime/pprof) to the file")
	_ = fs.Parse(os.Args[2:])
	if *profile != "" {
		pf, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peersgen:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	var res *Result
	var err error
	switch {
	case mode == "produce" && p.Proto == "grpc":
		res, err = grpcProduce(p)
	case mode == "produce" && p.Proto == "grpcraw":
		res, err = grpcRawProduce(p)
	case mode == "consume" && p.Proto == "grpc":
		res, err = grpcConsume(p)
	case mode == "consume" && p.Proto == "grpcraw":
		res, err = grpcRawConsume(p)
	case mode == "produce":
		res, err = produce(p)
	case mode == "consume":
		res, err = consume(p)
	case mode == "e2e":
		res, err = e2e(p)
	case mode == "setup":
		err = setup(p)
		res = &Result{Mode: "setup", Proto: p.Proto}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "peersgen:", err)
		os.Exit(1)
	}
	res.Mode, res.Proto = mode, p.Proto
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func consume(p Params) (*Result, error) {
	switch p.Proto {
	case "remoting":
		return remotingConsume(p)
	case "kafka":
		return kafkaConsume(p)
	case "nats":
		return natsConsume(p)
	case "redis":
		return redisConsume(p)
	}
	return nil, fmt.Errorf("consume: unknown proto %q", p.Proto)
}

func e2e(p Params) (*Result, error) {
	switch p.Proto {
	case "remoting":
		return remotingE2E(p)
	case "grpc":
		return grpcE2E(p)
	case "grpcraw":
		return grpcRawE2E(p)
	case "kafka":
		return kafkaE2E(p)
	case "nats":
		return natsE2E(p)
	case "redis":
		return redisE2E(p)
	}
	return nil, fmt.Errorf("e2e: unknown proto %q", p.Proto)
}

func setup(p Params) error {
	switch p.Proto {
	case "kafka":
		return kafkaSetup(p)
	case "nats":
		return natsSetup(p)
	}
	return nil
}
