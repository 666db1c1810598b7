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
// open as many Redis connections as it had requests in flight. The hub subscribes once, to the pattern of
// every task's done channel, and fans each announcement out to the waiters
// of its channel.
//
// One pattern rather than a subscription per task spares each wait two
// Redis commands, and the round trip of a subscription's confirmation
// before its task may be queued. Every hub then hears every
// task's end, which at a few thousand announcements a second is a few
// hundred KiB/s per API process.
//
// go-redis reconnects a broken pub/sub connection and subscribes its
// pattern again. Announcements published while it was away are lost, so a
// renewed subscription asks every waiter to look for its outcome again (the
// stored announcement, and the caller's check of PostgreSQL in
// Tasks.Do).
type Hub struct {
	rdb   redis.UniversalClient
	start sync.Once
	ps    *redis.PubSub
	// ready is closed when Redis first confirms the subscription; done
	// is closed when the hub stops: its waiters stop waiting.
	ready, done chan struct{}

	mu        sync.Mutex
	channels  map[string]map[*Waiter]struct{}
	confirmed bool
	closed    bool
}

// healthInterval is how long the hub's connection may stay silent before it
// pings Redis: a ping that fails makes go-redis reconnect, so a connection
// that died without an error (a restarted Redis behind a proxy) is noticed.
const healthInterval = 3 * time.Second

// subscribeTimeout bounds the wait for Redis to confirm the hub's
// subscription.
const subscribeTimeout = 5 * time.Second

// ErrHubClosed is returned by Subscribe after Close.
var ErrHubClosed = errors.New("taskwait: hub closed")

// NewHub returns a hub on rdb. It opens its connection on the first
// Subscribe. Close it when the process stops.
func NewHub(rdb redis.UniversalClient) *Hub {
	return &Hub{rdb: rdb, ready: make(chan struct{}), done: make(chan struct{}),
		channels: map[string]map[*Waiter]struct{}{}}
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
		// A failed PSUBSCRIBE is remembered by go-redis and sent again
		// when the receive loop reconnects; Subscribe waits for its
		// confirmation.
		h.ps = h.rdb.PSubscribe(context.Background(), jobs.DoneChannel(database(h.rdb), "*"))
		go h.receive()
	})
}

// Subscribe listens on the done channel of taskID. It returns once Redis has
// confirmed the hub's subscription, so that a task enqueued afterwards
// cannot announce its end before anyone listens. Close the Waiter when done.
func (h *Hub) Subscribe(ctx context.Context, taskID string) (*Waiter, error) {
	h.run()
	ch := jobs.DoneChannel(database(h.rdb), taskID)
	w := &Waiter{hub: h, rdb: h.rdb, taskID: taskID, channel: ch,
		msgs: make(chan []byte, 4), recheck: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrHubClosed
	}
	if h.channels[ch] == nil {
		h.channels[ch] = map[*Waiter]struct{}{}
	}
	h.channels[ch][w] = struct{}{}
	h.mu.Unlock()
	select {
	case <-h.ready:
		return w, nil
	default:
	}
	timer := time.NewTimer(subscribeTimeout)
	defer timer.Stop()
	select {
	case <-h.ready:
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

// leave removes w.
func (h *Hub) leave(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.channels[w.channel]
	delete(ws, w)
	if len(ws) == 0 {
		delete(h.channels, w.channel)
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
			// and subscribes the pattern again; the confirmation that
			// follows asks the waiters to look again.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "psubscribe" {
				h.subscribed()
			}
		case *redis.Message:
			h.deliver(m.Channel, []byte(m.Payload))
		}
	}
}

// subscribed notes a confirmation of the hub's subscription. A confirmation
// after the first is a subscription renewed after a reconnect: every waiter
// may have missed an announcement, and is asked to look again.
func (h *Hub) subscribed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.confirmed {
		h.confirmed = true
		close(h.ready)
		return
	}
	for _, ws := range h.channels {
		for w := range ws {
			select {
			case w.recheck <- struct{}{}:
			default: // one pending recheck is enough
			}
		}
	}
}

// deliver hands an announcement to every waiter of ch; an announcement of a
// channel nobody here waits on is dropped. A waiter whose buffer is full
// misses it, and finds it stored (Publish) at its next look.
func (h *Hub) deliver(ch string, payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.channels[ch] {
		select {
		case w.msgs <- payload:
		default:
		}
	}
}
