// Package email sends migration e-mails from the outbox. Every e-mail is
// recorded in email_outbox when its account is created, whether or not SMTP
// is configured; sending marks the row sent.
package email

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/wneessen/go-mail"
)

// SendTimeout bounds each of a delivery's two phases: connecting (dial,
// greeting, STARTTLS, AUTH) and sending the message. The task's context
// bounds the whole: a slow or silent server cannot hold a worker past its
// task's deadline.
const SendTimeout = 30 * time.Second

// defaultFrom is the sender when SMTP_URL names none.
const defaultFrom = "migration@localhost"

// Sender sends outbox rows through SMTP when configured.
type Sender struct {
	db   *db.DB
	smtp *server // nil: record only
}

// server is where and how to deliver, read from SMTP_URL.
type server struct {
	host           string
	port           int
	implicitTLS    bool // smtps://
	user, password string
	from           string
}

// NewSender returns a sender. smtpURL is SMTP_URL (smtp:// or smtps://, with
// optional user:password and ?from=address); empty means record only. The
// port defaults to 25 for smtp:// and 465 for smtps://. smtp:// upgrades with
// STARTTLS when the server offers it; credentials are only sent over TLS or
// to localhost.
func NewSender(d *db.DB, smtpURL string) (*Sender, error) {
	s := &Sender{db: d}
	if smtpURL == "" {
		return s, nil
	}
	u, err := url.Parse(smtpURL)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	srv := &server{host: u.Hostname(), port: 25, implicitTLS: u.Scheme == "smtps", from: u.Query().Get("from")}
	if u.Scheme != "smtp" && u.Scheme != "smtps" {
		return nil, errors.New("SMTP_URL: must be an smtp:// or smtps:// URL")
	}
	if srv.implicitTLS {
		srv.port = 465
	}
	if p := u.Port(); p != "" {
		if srv.port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("SMTP_URL: port %q: %w", p, err)
		}
	}
	if u.User != nil {
		srv.user = u.User.Username()
		srv.password, _ = u.User.Password()
	}
	if srv.from == "" {
		srv.from = defaultFrom
	}
	s.smtp = srv
	return s, nil
}

// Send delivers one outbox row. A row already sent, or sent by an earlier
// attempt of the same task, is not sent again.
func (s *Sender) Send(ctx context.Context, outboxID int64) error {
	var m struct {
		To      string       `db:"to_address"`
		Subject string       `db:"subject"`
		Body    string       `db:"body"`
		SentAt  sql.NullTime `db:"sent_at"`
	}
	err := s.db.GetContext(ctx, &m, `SELECT to_address, subject, body, sent_at FROM email_outbox WHERE id = $1`, outboxID)
	if errors.Is(err, db.ErrNotFound) {
		return nil // the account was removed; nothing to send
	}
	if err != nil {
		return fmt.Errorf("read outbox %d: %w", outboxID, err)
	}
	if m.SentAt.Valid || s.smtp == nil {
		return nil
	}
	if err := s.smtp.deliver(ctx, m.To, m.Subject, m.Body); err != nil {
		_, _ = s.db.ExecContext(ctx, `UPDATE email_outbox SET last_error = $2 WHERE id = $1`, outboxID, err.Error())
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE email_outbox SET sent_at = now(), last_error = NULL WHERE id = $1`, outboxID)
	return err
}

// message builds the e-mail. go-mail writes every header: addresses are
// parsed (an address with CR or LF is refused), the subject is MIME-encoded
// when it holds anything but printable ASCII, and the body is sent
// quoted-printable, so no value can start a header or end the DATA.
func (srv *server) message(to, subject, body string) (*mail.Msg, error) {
	m := mail.NewMsg()
	if err := m.From(srv.from); err != nil {
		return nil, fmt.Errorf("from address: %w", err)
	}
	if err := m.To(to); err != nil {
		return nil, fmt.Errorf("to address: %w", err)
	}
	m.Subject(subject)
	m.SetBodyString(mail.TypeTextPlain, body)
	return m, nil
}

func (srv *server) deliver(ctx context.Context, to, subject, body string) error {
	m, err := srv.message(to, subject, body)
	if err != nil {
		return err
	}
	timeout := SendTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return fmt.Errorf("send: %w", context.DeadlineExceeded)
	}
	// go-mail uses the context for the dial alone, and connection deadlines
	// after it. Closing the connection when ctx ends stops a delivery at the
	// task's deadline, or as soon as the task is cancelled (at shutdown).
	var stops []func() bool
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	dial := func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		var d interface {
			DialContext(context.Context, string, string) (net.Conn, error)
		} = &net.Dialer{}
		if srv.implicitTLS {
			d = &tls.Dialer{Config: &tls.Config{ServerName: srv.host, MinVersion: tls.VersionTLS12}}
		}
		conn, err := d.DialContext(dialCtx, network, addr)
		if err != nil {
			return nil, err
		}
		stops = append(stops, context.AfterFunc(ctx, func() { conn.Close() }))
		return conn, nil
	}
	opts := []mail.Option{
		mail.WithPort(srv.port),
		mail.WithTimeout(timeout),
		mail.WithDialContextFunc(dial),
		// With smtps:// the connection is TLS from the start, which go-mail
		// detects; smtp:// upgrades when the server offers STARTTLS.
		mail.WithTLSPolicy(mail.TLSOpportunistic),
	}
	if srv.user != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(srv.user), mail.WithPassword(srv.password))
	}
	c, err := mail.NewClient(srv.host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		return fmt.Errorf("smtp %s: %w", net.JoinHostPort(srv.host, strconv.Itoa(srv.port)), err)
	}
	return nil
}
