package anthropic

import (
	"sync"
	"time"

	"github.com/llmserve/llmserve/clock"
)

// defaultPingInterval is how long a Messages stream stays silent before a
// ping: Anthropic sends them periodically, and clients (Claude Code) take
// a long silence for a dead connection while a long prompt is prefilled.
const defaultPingInterval = 5 * time.Second

// pinger serialises a stream's events and writes a ping whenever none was
// written for its interval, from its own goroutine, until stop.
type pinger struct {
	mu    sync.Mutex // guards emit's writer and stopped
	emit  func(event string, v any) error
	timer clock.Timer
	every time.Duration
	// stopped is set by stop; no ping is written after it.
	stopped bool
	quit    chan struct{}
	done    chan struct{}
}

// startPinger starts pinging through emit every interval of c's time in
// which nothing else was sent.
func startPinger(c clock.Clock, every time.Duration, emit func(event string, v any) error) *pinger {
	p := &pinger{emit: emit, timer: c.NewTimer(every), every: every, quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *pinger) run() {
	defer close(p.done)
	for {
		select {
		case <-p.timer.C():
			p.mu.Lock()
			if !p.stopped {
				// A failed write is the client gone: the stream's own
				// next write reports it.
				_ = p.emit("ping", messagesTypeEvent{Type: "ping"})
				p.timer.Reset(p.every)
			}
			p.mu.Unlock()
		case <-p.quit:
			return
		}
	}
}

// send writes one event and restarts the silence the next ping waits for.
func (p *pinger) send(event string, v any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.emit(event, v)
	p.timer.Reset(p.every)
	return err
}

// stop ends the pings and waits for the goroutine; nothing is written
// through emit afterwards.
func (p *pinger) stop() {
	p.mu.Lock()
	p.stopped = true
	p.timer.Stop()
	p.mu.Unlock()
	close(p.quit)
	<-p.done
}
