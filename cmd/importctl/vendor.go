package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
)

// vendorCmd configures payment vendors (their protocol: jobs/payment/PROTOCOL.md).
func (c *cli) vendorCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "vendor", Short: "Manage payment vendors that verify payment instructions"}
	var v payment.Vendor
	add := &cobra.Command{Use: "add NAME --url BASE_URL [--timeout 5s]", Short: "Configure a payment vendor", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			v.Name = args[0]
			out, err := payment.AddVendor(ctx, d, v)
			if err != nil {
				return err
			}
			return c.done(out.JSON(), fmt.Sprintf("added vendor %s at %s (timeout %s, %d attempts, backoff %s)",
				out.Name, out.BaseURL, out.Timeout, out.Attempts, out.Backoff))
		})}
	add.Flags().StringVar(&v.BaseURL, "url", "", "base URL of the vendor protocol (required), e.g. https://pay.example/api")
	add.Flags().DurationVar(&v.Timeout, "timeout", payment.DefaultTimeout, "how long one request to the vendor may take")
	add.Flags().IntVar(&v.Attempts, "attempts", payment.DefaultAttempts, "tries in all for intermittent failures (1 to 10)")
	add.Flags().DurationVar(&v.Backoff, "backoff", payment.DefaultBackoff, "wait after the first failed try; doubles after each further one")
	add.Flags().StringVar(&v.Adapter, "adapter", payment.AdapterHTTP, "code that talks to the vendor: "+fmt.Sprint(payment.Adapters()))
	_ = add.MarkFlagRequired("url")
	list := &cobra.Command{Use: "list", Short: "List payment vendors", Args: cobra.NoArgs,
		RunE: c.withDB(func(ctx context.Context, d *db.DB, _ []string) error {
			vs, err := payment.ListVendors(ctx, d)
			if err != nil {
				return err
			}
			out := make([]any, len(vs))
			rows := make([][]string, len(vs))
			for i, v := range vs {
				out[i] = v.JSON()
				rows[i] = []string{v.Name, v.BaseURL, v.Timeout.String(), strconv.Itoa(v.Attempts), v.Backoff.String(), v.Adapter}
			}
			return c.print(out, []string{"NAME", "URL", "TIMEOUT", "ATTEMPTS", "BACKOFF", "ADAPTER"}, rows)
		})}
	cmd.AddCommand(add, list)
	return cmd
}

// vendorSimCmd runs the payment vendor simulator until interrupted.
func (c *cli) vendorSimCmd() *cobra.Command {
	var (
		addr, file string
		cfg        vendorsim.Config
		parent     int
	)
	cmd := &cobra.Command{Use: "vendor-sim --addr 127.0.0.1:PORT", Short: "Serve the payment vendor protocol from a JSON file (for demos and tests)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file != "" {
				b, err := vendorsim.LoadFile(file)
				if err != nil {
					return err
				}
				cfg.Instructions = b
			}
			sim, err := vendorsim.New(cfg)
			if err != nil {
				return fmt.Errorf("%s: %w", fileName(file), err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr: %w", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			if parent > 0 {
				go exitWith(ctx, parent, cancel)
			}
			if _, err := fmt.Fprintf(c.out, "vendor simulator listening on http://%s\n", ln.Addr()); err != nil {
				ln.Close()
				return err
			}
			return vendorsim.Serve(ctx, ln, sim)
		}}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:18090", "address to listen on")
	cmd.Flags().StringVar(&file, "file", "", "JSON array of the instructions to serve (default: the demo's three)")
	cmd.Flags().IntVar(&cfg.FailFirst, "fail-first", 0, "answer 503 to the first N requests for each reference")
	cmd.Flags().BoolVar(&cfg.AlwaysFail, "always-fail", false, "answer 503 to every request")
	cmd.Flags().DurationVar(&cfg.Delay, "delay", 0, "wait this long before each answer")
	cmd.Flags().IntVar(&parent, "exit-with-pid", 0, "stop when the process with this id ends (make run ties the simulator to the service)")
	return cmd
}

func fileName(f string) string {
	if f == "" {
		return "built-in instructions"
	}
	return f
}

// exitWith calls stop once process pid no longer exists.
func exitWith(ctx context.Context, pid int, stop func()) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p, err := os.FindProcess(pid)
			if err == nil {
				err = p.Signal(syscall.Signal(0))
			}
			if err != nil {
				stop()
				return
			}
		}
	}
}
