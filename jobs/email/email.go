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
	"net/smtp"
	"net/url"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Sender sends outbox rows through SMTP when configured.
type Sender struct {
	db  *sqlx.DB
	url *url.URL // nil: record only
}

// NewSender returns a sender. smtpURL is SMTP_URL (smtp:// or smtps://, with
// optional user:password and ?from=address); empty means record only.
func NewSender(d *sqlx.DB, smtpURL string) (*Sender, error) {
	s := &Sender{db: d}
	if smtpURL != "" {
		u, err := url.Parse(smtpURL)
		if err != nil {
			return nil, fmt.Errorf("SMTP_URL: %w", err)
		}
		s.url = u
	}
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
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the account was removed; nothing to send
	}
	if err != nil {
		return fmt.Errorf("read outbox %d: %w", outboxID, err)
	}
	if m.SentAt.Valid || s.url == nil {
		return nil
	}
	if err := s.deliver(m.To, m.Subject, m.Body); err != nil {
		_, _ = s.db.ExecContext(ctx, `UPDATE email_outbox SET last_error = $2 WHERE id = $1`, outboxID, err.Error())
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE email_outbox SET sent_at = now(), last_error = NULL WHERE id = $1`, outboxID)
	return err
}

func (s *Sender) deliver(to, subject, body string) error {
	host := s.url.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "25")
	}
	from := s.url.Query().Get("from")
	if from == "" {
		from = "migration@localhost"
	}
	msg := "From: " + from + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n")
	var auth smtp.Auth
	if s.url.User != nil {
		pass, _ := s.url.User.Password()
		auth = smtp.PlainAuth("", s.url.User.Username(), pass, s.url.Hostname())
	}
	if s.url.Scheme == "smtps" {
		conn, err := tls.Dial("tcp", host, &tls.Config{ServerName: s.url.Hostname()})
		if err != nil {
			return err
		}
		c, err := smtp.NewClient(conn, s.url.Hostname())
		if err != nil {
			return err
		}
		defer c.Close()
		if auth != nil {
			if err := c.Auth(auth); err != nil {
				return err
			}
		}
		if err := c.Mail(from); err != nil {
			return err
		}
		if err := c.Rcpt(to); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte(msg)); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return c.Quit()
	}
	return smtp.SendMail(host, auth, from, []string{to}, []byte(msg))
}
