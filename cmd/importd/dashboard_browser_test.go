package main

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// blackHole listens on loopback and accepts connections without ever
// answering, as a firewall that drops packets looks to a browser. It
// returns its address.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Behind a firewall, the Asynqmon dashboard still renders: with every host
// but loopback leading to a black hole, the page draws its queues, and it
// asks nothing of any host but the service's.
func TestDashboard_RendersOfflineWithoutRequestsToOtherHosts(t *testing.T) {
	t.Parallel()
	hole := blackHole(t)
	ctx, problems := browser(t, chromedp.Flag("host-resolver-rules", "MAP * "+hole+", EXCLUDE 127.0.0.1"))
	s := startService(t, "dashboard", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword})
	u, err := url.Parse(s.base + "/monitoring/")
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var elsewhere []string
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			if r, err := url.Parse(e.Request.URL); err == nil && (r.Scheme == "http" || r.Scheme == "https") && r.Hostname() != u.Hostname() {
				mu.Lock()
				elsewhere = append(elsewhere, e.Request.URL)
				mu.Unlock()
			}
		}
	})
	var text string
	tctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	err = chromedp.Run(tctx,
		basicAuth("ops", testPassword),
		chromedp.Navigate(u.String()),
		chromedp.Poll(`document.getElementById("root") && document.getElementById("root").innerText.includes("Queues")`, nil,
			chromedp.WithPollingTimeout(40*time.Second)),
		chromedp.Evaluate(`document.getElementById("root").innerText`, &text),
	)
	if err != nil {
		t.Fatalf("the dashboard did not render offline: %v (page problems: %v)", err, problems())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) > 0 {
		t.Errorf("the dashboard asked other hosts: %s", strings.Join(elsewhere, ", "))
	}
}
