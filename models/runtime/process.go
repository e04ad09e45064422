package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// Restart backoff: the first restart waits minBackoff, each next one
// twice as long up to maxBackoff; a process that ran healthy for
// resetAfter starts the count again.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
	resetAfter = 30 * time.Second
	// pollEvery is how often a starting process is asked whether it is
	// ready.
	pollEvery = 50 * time.Millisecond
	// tailLines is how many lines of a process's output a failure quotes.
	tailLines = 20
)

// proc is one of a model's runtime processes (one per parallel worker)
// and the goroutine that supervises it: start, wait until it answers,
// restart it with backoff when it dies, stop it on Close.
type proc struct {
	m    *Model
	idx  int
	sock string

	mu      sync.Mutex
	inc     *incarnation  // guarded by mu; the ready process, nil while none
	changed chan struct{} // guarded by mu; closed (and replaced) when inc changes
	tail    []string      // guarded by mu; the last lines of output
}

// incarnation is one run of the process.
type incarnation struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	client pb.GRPCInferenceServiceClient
	// dead is closed once the process has exited; exit says how.
	dead chan struct{}
	exit string
}

func (inc *incarnation) alive() bool {
	select {
	case <-inc.dead:
		return false
	default:
		return true
	}
}

// current returns the ready incarnation (nil if none) and a channel
// closed when that changes.
func (p *proc) current() (*incarnation, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inc, p.changed
}

func (p *proc) publish(inc *incarnation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inc = inc
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *proc) ready() bool {
	inc, _ := p.current()
	return inc != nil && inc.alive()
}

// lastLines is the tail of the process's output, for errors.
func (p *proc) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// lineLog is a process's stdout or stderr: each line goes to the log,
// with the model's name, and to the tail.
type lineLog struct {
	p      *proc
	stream string
	mu     sync.Mutex
	buf    []byte // guarded by mu: a line not yet ended
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > 64<<10 { // a runaway line: log what there is
				l.line(string(l.buf))
				l.buf = l.buf[:0]
			}
			return len(b), nil
		}
		l.line(string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLog) line(s string) {
	l.p.m.cfg.Logger.Info("runtime output", "model", l.p.m.cfg.Name, "worker", l.p.idx, "stream", l.stream, "line", s)
	l.p.mu.Lock()
	l.p.tail = append(l.p.tail, s)
	if len(l.p.tail) > tailLines {
		l.p.tail = l.p.tail[len(l.p.tail)-tailLines:]
	}
	l.p.mu.Unlock()
}

// start starts one incarnation of the process.
func (p *proc) start() (*incarnation, error) {
	cfg := &p.m.cfg
	_ = os.Remove(p.sock)
	p.mu.Lock()
	p.tail = nil
	p.mu.Unlock()
	cmd := exec.Command("/bin/sh", "-c", cfg.Command)
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Env = append(cmd.Env,
		EnvSocket+"="+p.sock, EnvModelName+"="+cfg.Name, EnvModelVersion+"="+cfg.Version,
		EnvSettings+"="+cfg.SettingsPath, EnvWorker+"="+strconv.Itoa(p.idx), EnvParentPID+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdout = &lineLog{p: p, stream: "stdout"}
	cmd.Stderr = &lineLog{p: p, stream: "stderr"}
	// Output a grandchild keeps open does not hold up Wait.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = sysProcAttr()
	conn, err := grpc.NewClient("unix://"+p.sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: pollEvery, Multiplier: 1.5, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)))
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}
	inc := &incarnation{cmd: cmd, conn: conn, client: pb.NewGRPCInferenceServiceClient(conn), dead: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		switch {
		case err == nil:
			inc.exit = "exit status 0"
		case cmd.ProcessState != nil:
			inc.exit = cmd.ProcessState.String()
		default:
			inc.exit = err.Error()
		}
		close(inc.dead)
	}()
	p.m.cfg.Logger.Info("runtime process started", "model", cfg.Name, "worker", p.idx, "pid", cmd.Process.Pid, "socket", p.sock)
	return inc, nil
}

// waitReady polls the process until it answers ServerReady and
// ModelReady, it exits, StartTimeout passes or the model closes.
func (p *proc) waitReady(inc *incarnation) error {
	cfg := &p.m.cfg
	deadline := time.NewTimer(cfg.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-inc.dead:
			return fmt.Errorf("its runtime process exited (%s) before it answered ServerReady%s", inc.exit, p.quoteTail())
		case <-deadline.C:
			return fmt.Errorf("its runtime process did not answer ServerReady and ModelReady on %s within %s%s", p.sock, cfg.StartTimeout, p.quoteTail())
		case <-p.m.quit:
			return ErrClosed
		case <-tick.C:
		}
		if _, err := os.Stat(p.sock); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(p.m.ctx, time.Second)
		ok := p.probe(ctx, inc)
		cancel()
		if ok {
			return nil
		}
	}
}

// probe asks the process whether it and its model are ready; a runtime
// without ModelReady is ready when ServerReady says so.
func (p *proc) probe(ctx context.Context, inc *incarnation) bool {
	sr, err := inc.client.ServerReady(ctx, &pb.ServerReadyRequest{})
	if err != nil || !sr.GetReady() {
		return false
	}
	mr, err := inc.client.ModelReady(ctx, &pb.ModelReadyRequest{Name: p.m.cfg.Name})
	if status.Code(err) == codes.Unimplemented {
		return true
	}
	return err == nil && mr.GetReady()
}

func (p *proc) quoteTail() string {
	if t := p.lastLines(); t != "" {
		return "; its last output:\n" + t
	}
	return "; it wrote nothing"
}

// stop ends the incarnation: SIGTERM to its process group, SIGKILL after
// StopGrace.
func (p *proc) stop(inc *incarnation) {
	defer inc.conn.Close() //nolint:errcheck // nothing left to tell
	if !inc.alive() {
		return
	}
	pid := inc.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	grace := time.NewTimer(p.m.cfg.StopGrace)
	defer grace.Stop()
	select {
	case <-inc.dead:
		p.m.cfg.Logger.Info("runtime process stopped", "model", p.m.cfg.Name, "worker", p.idx, "pid", pid, "exit", inc.exit)
		return
	case <-grace.C:
	}
	p.m.cfg.Logger.Warn("runtime process did not stop after SIGTERM; killing it", "model", p.m.cfg.Name, "worker", p.idx, "pid", pid, "grace", p.m.cfg.StopGrace)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-inc.dead
}

// supervise runs the process for the model's life. The first start's
// result goes to started; later ones are retried with backoff.
func (p *proc) supervise(started chan<- error) {
	defer p.m.procs.Done()
	log := p.m.cfg.Logger
	wait := minBackoff
	first := true
	for {
		inc, err := p.start()
		if err == nil {
			if err = p.waitReady(inc); err != nil {
				p.stop(inc)
			} else {
				// Ready before Start returns: the model serves at once,
				// its codecs' content types known.
				p.m.learnContentTypes(inc)
				p.publish(inc)
			}
		}
		if first {
			first = false
			started <- err
			if err != nil {
				return
			}
		}
		if errors.Is(err, ErrClosed) {
			return
		}
		if err == nil {
			began := time.Now()
			log.Info("runtime process ready", "model", p.m.cfg.Name, "worker", p.idx, "pid", inc.cmd.Process.Pid)
			select {
			case <-p.m.quit:
				p.publish(nil)
				p.stop(inc)
				return
			case <-inc.dead:
			}
			p.publish(nil)
			_ = inc.conn.Close()
			if time.Since(began) > resetAfter {
				wait = minBackoff
			}
			log.Warn("runtime process exited; restarting it", "model", p.m.cfg.Name, "worker", p.idx, "exit", inc.exit, "after", wait, "output", p.lastLines())
		} else {
			log.Warn("runtime process failed to start; retrying", "model", p.m.cfg.Name, "worker", p.idx, "err", err, "after", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-p.m.quit:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}
