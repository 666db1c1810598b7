package email

import (
	"context"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/go-cmp/cmp"
)

// received is one message an in-test SMTP server accepted.
type received struct {
	From string
	To   []string
	Data string
}

// smtpPeer is a real SMTP server (github.com/emersion/go-smtp) on a loopback
// port, keeping what it is sent.
type smtpPeer struct {
	addr string
	mu   sync.Mutex
	msgs []received
}

func startSMTP(t *testing.T) *smtpPeer {
	t.Helper()
	p := &smtpPeer{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{peer: p}, nil }))
	srv.Domain = "peer.test"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return p
}

func (p *smtpPeer) messages() []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]received(nil), p.msgs...)
}

type session struct {
	peer *smtpPeer
	msg  received
}

func (s *session) Reset()        { s.msg = received{} }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.msg.From = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.msg.To = append(s.msg.To, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.Data = string(b)
	s.peer.mu.Lock()
	s.peer.msgs = append(s.peer.msgs, s.msg)
	s.peer.mu.Unlock()
	return nil
}

func newServer(t *testing.T, smtpURL string) *server {
	t.Helper()
	s, err := NewSender(nil, smtpURL)
	if err != nil {
		t.Fatal(err)
	}
	return s.smtp
}

// The mail library writes the headers: a subject or body with CR, LF or an
// SMTP command in it reaches the recipient as text, and adds no header, no
// recipient and no second message.
func TestDeliver_LineBreaksInValuesCannotInjectHeadersOrMessages(t *testing.T) {
	t.Parallel()
	peer := startSMTP(t)
	srv := newServer(t, "smtp://"+peer.addr+"?from=migration@demo.test")
	subject := "Welcome\r\nBcc: evil@example.com"
	body := "Dear Eve\r\nBcc: evil@example.com\r\n.\r\nMAIL FROM:<evil@example.com>\r\nRCPT TO:<evil@example.com>\r\nDATA\r\nSubject: smuggled\r\n\r\nhi\r\n.\r\n"
	if err := srv.deliver(context.Background(), "amelia@example.com", subject, body); err != nil {
		t.Fatal(err)
	}
	msgs := peer.messages()
	if len(msgs) != 1 {
		t.Fatalf("the server got %d messages, want 1: %+v", len(msgs), msgs)
	}
	got := msgs[0]
	if diff := cmp.Diff(received{From: "migration@demo.test", To: []string{"amelia@example.com"}}, received{From: got.From, To: got.To}); diff != "" {
		t.Errorf("envelope (-want +got):\n%s", diff)
	}
	m, err := mail.ReadMessage(strings.NewReader(got.Data))
	if err != nil {
		t.Fatalf("message does not parse: %v\n%s", err, got.Data)
	}
	if bcc := m.Header.Get("Bcc"); bcc != "" {
		t.Errorf("a Bcc header %q was injected:\n%s", bcc, got.Data)
	}
	gotSubject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil || gotSubject != subject {
		t.Errorf("subject %q (%v), want %q", gotSubject, err, subject)
	}
	gotBody, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(body, string(gotBody)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// An address with a line break is refused before anything is sent.
func TestDeliver_AddressWithALineBreakIsRefused(t *testing.T) {
	t.Parallel()
	peer := startSMTP(t)
	srv := newServer(t, "smtp://"+peer.addr)
	err := srv.deliver(context.Background(), "amelia@example.com\r\nBcc: evil@example.com", "s", "b")
	if err == nil {
		t.Fatal("an address with CR LF was accepted")
	}
	if n := len(peer.messages()); n != 0 {
		t.Errorf("the server got %d messages", n)
	}
}

// A server that accepts the connection and then says nothing holds a
// delivery no longer than its task allows: until the task's deadline, or
// until the task is cancelled.
func TestDeliver_SilentServerIsLeftWhenTheTaskEnds(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // never greets
			mu.Unlock()
		}
	}()
	srv := newServer(t, "smtp://"+ln.Addr().String())
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := tc.ctx()
			defer cancel()
			began := time.Now()
			err := srv.deliver(ctx, "amelia@example.com", "s", "b")
			if took := time.Since(began); took > SendTimeout/2 {
				t.Errorf("delivery returned after %v, want soon after the task ended (SendTimeout is %v)", took, SendTimeout)
			}
			if err == nil {
				t.Error("a delivery to a server that never answered succeeded")
			}
		})
	}
}

func TestNewSender_ReadsSMTPURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url     string
		want    *server
		wantErr bool
	}{
		{url: "", want: nil},
		{url: "smtp://mail.example", want: &server{host: "mail.example", port: 25, from: defaultFrom}},
		{url: "smtps://mail.example", want: &server{host: "mail.example", port: 465, implicitTLS: true, from: defaultFrom}},
		{url: "smtp://u%40x:p%3Aw@mail.example:2525?from=migration@demo.test",
			want: &server{host: "mail.example", port: 2525, user: "u@x", password: "p:w", from: "migration@demo.test"}},
		{url: "http://mail.example", wantErr: true},
		{url: "smtp://mail.example:port", wantErr: true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			s, err := NewSender(nil, tc.url)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, s.smtp, cmp.AllowUnexported(server{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
