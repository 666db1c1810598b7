package taskwait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
)

// Hub shares one Redis pub/sub connection among every request of a process
// that waits for a task. A connection per waiting request let one client
// open as many Redis connections as it had requests in flight (issue 20:
// 400 waits, 400 connections); the hub subscribes to a task's done channel
// when its first waiter arrives, fans each announcement out to every
// waiter of that channel, and unsubscribes when the last one leaves.
//
// go-redis reconnects a broken pub/sub connection and subscribes its
// channels again. Announcements published while it was away are lost, so
// each channel's renewed subscription asks all of its waiters to look for
// their outcome again (the stored announcement, and the caller's check of
// PostgreSQL in WaitOrCheck).
type Hub struct {
	rdb   redis.UniversalClient
	start sync.Once
	ps    *redis.PubSub
	// done is closed when the hub stops: its waiters stop waiting.
	done chan struct{}

	mu       sync.Mutex
	channels map[string]*subscription
	closed   bool
}

// subscription is one done channel and the waiters that listen on it.
type subscription struct {
	waiters map[*Waiter]struct{}
	// ready is closed when Redis confirms the subscription.
	ready     chan struct{}
	confirmed bool
}

// healthInterval is how long the hub's connection may stay silent before it
// pings Redis: a ping that fails makes go-redis reconnect, so a connection
// that died without an error (a restarted Redis behind a proxy) is noticed.
const healthInterval = 3 * time.Second

// subscribeTimeout bounds the wait for Redis to confirm a subscription.
const subscribeTimeout = 5 * time.Second

// ErrHubClosed is returned by Subscribe after Close.
var ErrHubClosed = errors.New("taskwait: hub closed")

// NewHub returns a hub on rdb. It opens its connection on the first
// Subscribe. Close it when the process stops.
func NewHub(rdb redis.UniversalClient) *Hub {
	return &Hub{rdb: rdb, done: make(chan struct{}), channels: map[string]*subscription{}}
}

// Close ends the hub's connection; every waiter's wait ends as when its
// subscription breaks.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.start.Do(func() { close(h.done) }) // never started: nothing to stop
	if h.ps != nil {
		return h.ps.Close() // the receive loop then closes done
	}
	return nil
}

func (h *Hub) run() {
	h.start.Do(func() {
		h.ps = h.rdb.Subscribe(context.Background())
		go h.receive()
	})
}

// Subscribe listens on the done channel of taskID. It returns once Redis has
// confirmed the subscription, so that a task enqueued afterwards cannot
// announce its end before anyone listens. Close the Waiter when done.
func (h *Hub) Subscribe(ctx context.Context, taskID string) (*Waiter, error) {
	h.run()
	ch := jobs.DoneChannel(taskID)
	w := &Waiter{hub: h, rdb: h.rdb, taskID: taskID, channel: ch,
		msgs: make(chan []byte, 4), recheck: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrHubClosed
	}
	s := h.channels[ch]
	if s == nil {
		s = &subscription{waiters: map[*Waiter]struct{}{}, ready: make(chan struct{})}
		if err := h.ps.Subscribe(ctx, ch); err != nil {
			// go-redis remembers the channel even when the command
			// failed; forget it, or a reconnect would subscribe it again.
			_ = h.ps.Unsubscribe(context.WithoutCancel(ctx), ch)
			h.mu.Unlock()
			return nil, fmt.Errorf("subscribe to %s: %w", taskID, err)
		}
		h.channels[ch] = s
	}
	s.waiters[w] = struct{}{}
	ready := s.ready
	h.mu.Unlock()
	timer := time.NewTimer(subscribeTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return w, nil
	case <-ctx.Done():
		w.Close()
		return nil, ctx.Err()
	case <-timer.C:
		w.Close()
		return nil, fmt.Errorf("subscribe to %s: not confirmed within %v", taskID, subscribeTimeout)
	case <-h.done:
		w.Close()
		return nil, ErrHubClosed
	}
}

// leave removes w; the channel is unsubscribed when w was its last waiter.
func (h *Hub) leave(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.channels[w.channel]
	if s == nil {
		return
	}
	delete(s.waiters, w)
	if len(s.waiters) == 0 {
		delete(h.channels, w.channel)
		if !h.closed {
			_ = h.ps.Unsubscribe(context.Background(), w.channel)
		}
	}
}

// receive reads the hub's connection until Close.
func (h *Hub) receive() {
	defer close(h.done)
	ctx := context.Background()
	for {
		msg, err := h.ps.ReceiveTimeout(ctx, healthInterval)
		var ne net.Error
		switch {
		case errors.Is(err, redis.ErrClosed):
			return
		case errors.As(err, &ne) && ne.Timeout():
			// Silence: a failing ping makes go-redis reconnect.
			_ = h.ps.Ping(ctx)
			continue
		case err != nil:
			// The connection broke. The next ReceiveTimeout reconnects
			// and subscribes every channel again; the confirmations
			// that follow ask the waiters to look again.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.confirmed(m.Channel)
			}
		case *redis.Message:
			h.deliver(m.Channel, []byte(m.Payload))
		}
	}
}

// confirmed marks a subscription as confirmed. A confirmation of a channel
// confirmed before is a subscription renewed after a reconnect: its waiters
// may have missed an announcement, and are asked to look again.
func (h *Hub) confirmed(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.channels[ch]
	if s == nil {
		return
	}
	if !s.confirmed {
		s.confirmed = true
		close(s.ready)
		return
	}
	for w := range s.waiters {
		select {
		case w.recheck <- struct{}{}:
		default: // one pending recheck is enough
		}
	}
}

// deliver hands an announcement to every waiter of ch. A waiter whose
// buffer is full misses it, and finds it stored (Publish) at its next look.
func (h *Hub) deliver(ch string, payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.channels[ch]
	if s == nil {
		return
	}
	for w := range s.waiters {
		select {
		case w.msgs <- payload:
		default:
		}
	}
}
