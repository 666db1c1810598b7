// Command importctl is the operators' and migration teams' CLI: it sets up
// import suppliers, operations teams, the product catalogue and API keys,
// marks accounts to be skipped, and reads an imported account back (account
// show). It talks to PostgreSQL through DATABASE_URL; account show reads
// through the service's API instead when an API key is set.
//
// It exits 0 on success; otherwise it prints a one-line error to stderr and
// exits 1. Tables are for people; --json is for scripts. The migration
// runner (run), the reconciliation (reconcile) and the cohort generator
// (generate) talk to the service over HTTP, not to the database; run exits 1
// when some account failed, reconcile when something differs, and both 2 on a
// usage or connection error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"
	_ "time/tzdata" // the zones an operator names load on any machine

	"github.com/spf13/cobra"
	_ "gocloud.dev/blob/fileblob" // DOCUMENTS_URL=file://...
	_ "gocloud.dev/blob/s3blob"   // DOCUMENTS_URL=s3://...

	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
	supplierstatus "github.com/bulkimport/bulkimport/jobs/status"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run executes one command and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := &cli{getenv: getenv, out: stdout, log: slog.New(slog.NewTextHandler(stderr, nil))}
	root := c.commands()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if c.db != nil {
		c.db.Close()
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "importctl: "+oneLine(err))
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "importctl: "+oneLine(err))
		return 1
	}
	return 0
}

// warnInsecure warns on w when base is plain http:// to another machine
// (migrate.InsecureURL), across which the commands that talk to the API
// would send the API key and the tokens in clear.
func warnInsecure(w io.Writer, base string) {
	if migrate.InsecureURL(base) {
		fmt.Fprintf(w, "importctl: warning: %s is plain http:// to another machine: the API key and the tokens cross the network in clear; use https://\n", base)
	}
}

// oneLine renders an error for the terminal: a problem's detail, else the
// error text, on a single line.
func oneLine(err error) string {
	msg := err.Error()
	if p, ok := problem.As(err); ok && p.Kind != problem.Internal {
		msg = p.Detail
	}
	return strings.Join(strings.Fields(msg), " ")
}

type cli struct {
	getenv func(string) string
	out    io.Writer
	asJSON bool
	db     *db.DB
	// log is handed to the packages that log (the document store); their
	// lines go to stderr.
	log *slog.Logger
}

func (c *cli) open(ctx context.Context) (*db.DB, error) {
	if c.db != nil {
		return c.db, nil
	}
	u := c.getenv("DATABASE_URL")
	if u == "" {
		return nil, fmt.Errorf("DATABASE_URL: required but not set")
	}
	d, err := db.Open(ctx, u, 2)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	c.db = d
	return d, nil
}

// withDB adapts a command body that needs the database.
func (c *cli) withDB(fn func(ctx context.Context, d *db.DB, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		d, err := c.open(cmd.Context())
		if err != nil {
			return err
		}
		return fn(cmd.Context(), d, args)
	}
}

// print writes v as JSON with --json, else as a table of the given columns.
func (c *cli) print(v any, header []string, rows [][]string) error {
	if c.asJSON {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// done reports a successful change.
func (c *cli) done(v any, msg string) error {
	if c.asJSON {
		return json.NewEncoder(c.out).Encode(v)
	}
	_, err := fmt.Fprintln(c.out, msg)
	return err
}

func (c *cli) commands() *cobra.Command {
	root := &cobra.Command{
		Use:           "importctl",
		Short:         "Operate the bulk import service (reads DATABASE_URL)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&c.asJSON, "json", false, "print JSON instead of a table")
	root.AddCommand(c.supplierCmd(), c.teamCmd(), c.productCmd(), c.supplyTypeCmd(), c.apikeyCmd(), c.accountCmd(), c.documentCmd(),
		c.vendorCmd(), c.vendorSimCmd(), c.runCmd(), c.generateCmd(), c.reconcileCmd())
	return root
}

func (c *cli) supplierCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "supplier", Short: "Manage import suppliers"}
	var s admin.Supplier
	create := &cobra.Command{Use: "create CODE", Short: "Create an import supplier", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			s.Code = args[0]
			out, err := admin.CreateSupplier(ctx, d, s)
			if err != nil {
				return err
			}
			return c.done(out, fmt.Sprintf("created supplier %s (%s, %s, %s, documents under %s/)", out.Code, out.Status, out.Country, out.TimeZone, out.DocumentRoot))
		})}
	create.Flags().StringVar(&s.Status, "status", supplierstatus.Ongoing, "Ongoing, Paused or Complete")
	create.Flags().StringVar(&s.DocumentRoot, "document-root", "", "prefix of the supplier's documents in object storage, apart from every other supplier's (default suppliers/CODE)")
	create.Flags().StringVar(&s.Country, "country", "GB", "ISO 3166-1 alpha-2 region whose phone and postcode rules apply")
	create.Flags().BoolVar(&s.MigrationEmails, "migration-emails", false, "e-mail customers when their account is created")
	create.Flags().StringVar(&s.TimeZone, "time-zone", "UTC", "IANA time zone in which the supplier's \"today\" is dated (e.g. Australia/Sydney)")
	create.Flags().BoolVar(&s.RequireDocuments, admin.OptionRequireDocuments, false,
		"refuse document paths that name nothing in the document store (E5, E6, E8)")
	setStatus := &cobra.Command{Use: "set-status CODE STATUS", Short: "Set a supplier's status", Args: cobra.ExactArgs(2),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			args[1] = admin.CanonicalStatus(args[1])
			if err := admin.SetSupplierStatus(ctx, d, args[0], args[1]); err != nil {
				return err
			}
			return c.done(map[string]string{"code": args[0], "status": args[1]}, fmt.Sprintf("supplier %s is now %s", args[0], args[1]))
		})}
	setRoot := &cobra.Command{Use: "set-document-root CODE ROOT", Short: "Change a supplier's document root",
		Long: "Change a supplier's document root: the prefix of its documents in object storage, which may be neither\n" +
			"inside nor around another supplier's root. Documents under the old root are not moved; move them first.",
		Args: cobra.ExactArgs(2),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			root, err := admin.SetDocumentRoot(ctx, d, args[0], args[1])
			if err != nil {
				return err
			}
			return c.done(map[string]string{"code": args[0], "document_root": root}, fmt.Sprintf("supplier %s: documents under %s/", args[0], root))
		})}
	setOption := &cobra.Command{Use: "set-option CODE " + admin.OptionRequireDocuments + " on|off", Short: "Turn a supplier's option on or off",
		Long: admin.OptionRequireDocuments + ": whether the documents that notes (E5, E6) and historical statements (E8) name must be\n" +
			"in the document store (path_does_not_exist_in_file_store). Off by default; when off, the store is not read.",
		Args: cobra.ExactArgs(3),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			var on bool
			switch args[2] {
			case "on":
				on = true
			case "off":
			default:
				return fmt.Errorf("%q is not on or off", args[2])
			}
			if err := admin.SetSupplierOption(ctx, d, args[0], args[1], on); err != nil {
				return err
			}
			return c.done(map[string]any{"code": args[0], "option": args[1], "on": on}, fmt.Sprintf("supplier %s: %s is now %s", args[0], args[1], args[2]))
		})}
	setZone := &cobra.Command{Use: "set-time-zone CODE ZONE", Short: "Set the time zone in which a supplier's \"today\" is dated",
		Long: "Set the IANA time zone (Europe/London, Australia/Sydney, ...) in which the supplier's \"today\" is dated: a\n" +
			"transaction (E7) or a statement's end (E8) may not be after today, the open statement period ends today, and a new\n" +
			"account's period opens on its creation date there. Default UTC. The API holds a change within half a minute.",
		Args: cobra.ExactArgs(2),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			if err := admin.SetSupplierTimeZone(ctx, d, args[0], args[1]); err != nil {
				return err
			}
			return c.done(map[string]string{"code": args[0], "time_zone": args[1]}, fmt.Sprintf("supplier %s: today is dated in %s", args[0], args[1]))
		})}
	list := &cobra.Command{Use: "list", Short: "List import suppliers", Args: cobra.NoArgs,
		RunE: c.withDB(func(ctx context.Context, d *db.DB, _ []string) error {
			ss, err := admin.ListSuppliers(ctx, d)
			if err != nil {
				return err
			}
			rows := make([][]string, len(ss))
			for i, s := range ss {
				rows[i] = []string{s.Code, s.Status, s.Country, s.TimeZone, s.DocumentRoot, fmt.Sprint(s.MigrationEmails), fmt.Sprint(s.RequireDocuments)}
			}
			return c.print(ss, []string{"CODE", "STATUS", "COUNTRY", "TIME ZONE", "DOCUMENT ROOT", "MIGRATION E-MAILS", "REQUIRE DOCUMENTS"}, rows)
		})}
	var force bool
	purge := &cobra.Command{Use: "purge-staged CODE [--force]", Short: "Blank the staged payloads of the supplier's created accounts",
		Long: "Blank the staged payloads (the personal data E4 received: names, dates of birth, e-mail addresses,\n" +
			"phone numbers, addresses) of the supplier's COMPLETED accounts, and print how many were blanked. The\n" +
			"created accounts keep their data; accounts not yet created keep their payloads. Refused while the\n" +
			"supplier is Ongoing unless --force: run it once the migration is closed (Complete).",
		Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			n, err := admin.PurgeStaged(ctx, d, args[0], force)
			if err != nil {
				return err
			}
			return c.done(map[string]any{"code": args[0], "purged": n}, fmt.Sprintf("supplier %s: purged the staged payloads of %d created account(s)", args[0], n))
		})}
	purge.Flags().BoolVar(&force, "force", false, "purge even though the supplier is Ongoing")
	cmd.AddCommand(create, setStatus, setRoot, setOption, setZone, purge, list)
	return cmd
}

func (c *cli) teamCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "team", Short: "Manage operations teams"}
	create := &cobra.Command{Use: "create NAME", Short: "Create an operations team", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			t, err := admin.CreateTeam(ctx, d, args[0])
			if err != nil {
				return err
			}
			return c.done(t, fmt.Sprintf("created team %q", t.Name))
		})}
	list := &cobra.Command{Use: "list", Short: "List operations teams", Args: cobra.NoArgs,
		RunE: c.withDB(func(ctx context.Context, d *db.DB, _ []string) error {
			ts, err := admin.ListTeams(ctx, d)
			if err != nil {
				return err
			}
			rows := make([][]string, len(ts))
			for i, t := range ts {
				rows[i] = []string{t.Name, t.CreatedAt.UTC().Format(time.RFC3339)}
			}
			return c.print(ts, []string{"NAME", "CREATED"}, rows)
		})}
	cmd.AddCommand(create, list)
	return cmd
}

func (c *cli) productCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "product", Short: "Manage the product catalogue"}
	var tariffs []string
	create := &cobra.Command{Use: "create PRODUCT_CODE --tariff TARIFF_CODE [--tariff ...]", Short: "Create a product with its tariffs", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			p, err := admin.CreateProduct(ctx, d, args[0], tariffs)
			if err != nil {
				return err
			}
			return c.done(p, fmt.Sprintf("created product %s with tariffs %s", p.Code, strings.Join(p.Tariffs, ", ")))
		})}
	create.Flags().StringArrayVar(&tariffs, "tariff", nil, "tariff code (repeatable, at least one)")
	list := &cobra.Command{Use: "list", Short: "List products and tariffs", Args: cobra.NoArgs,
		RunE: c.withDB(func(ctx context.Context, d *db.DB, _ []string) error {
			ps, err := admin.ListProducts(ctx, d)
			if err != nil {
				return err
			}
			rows := make([][]string, len(ps))
			for i, p := range ps {
				rows[i] = []string{p.Code, strings.Join(p.Tariffs, ",")}
			}
			return c.print(ps, []string{"PRODUCT", "TARIFFS"}, rows)
		})}
	cmd.AddCommand(create, list)
	return cmd
}

func (c *cli) apikeyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "apikey", Short: "Manage organisation API keys"}
	var suppliers []string
	var org string
	var all bool
	create := &cobra.Command{Use: "create NAME (--supplier CODE ... | --all-suppliers)", Short: "Create an API key and print it (shown only once)",
		Long: "Create an API key and print it (shown only once). A key names its suppliers with --supplier, or is\n" +
			"for every supplier, present and future, with --all-suppliers; one of the two is required.",
		Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			if all == (len(suppliers) > 0) {
				return fmt.Errorf("give either --supplier CODE (repeatable) or --all-suppliers")
			}
			scope := auth.OnlySuppliers(suppliers...)
			if all {
				scope = auth.AllSuppliers()
			}
			key, err := auth.CreateKey(ctx, d, args[0], org, scope)
			if err != nil {
				return err
			}
			// The key alone on one line, even with --json, so that scripts
			// can capture it with $(importctl apikey create NAME).
			_, err = fmt.Fprintln(c.out, key)
			return err
		})}
	create.Flags().StringArrayVar(&suppliers, "supplier", nil, "limit the key to this import supplier (repeatable)")
	create.Flags().BoolVar(&all, "all-suppliers", false, "let the key see every import supplier, including those created later")
	create.Flags().StringVar(&org, "organisation", "", "organisation that owns the key (default: the key's name)")
	list := &cobra.Command{Use: "list", Short: "List API keys (never the keys themselves)", Args: cobra.NoArgs,
		RunE: c.withDB(func(ctx context.Context, d *db.DB, _ []string) error {
			ks, err := auth.ListKeys(ctx, d)
			if err != nil {
				return err
			}
			rows := make([][]string, len(ks))
			for i, k := range ks {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
				}
				sup := k.Suppliers
				if k.AllSuppliers {
					sup = "(all)"
				}
				rows[i] = []string{k.Name, k.Organisation, k.Prefix + "…", sup, state}
			}
			if ks == nil {
				ks = []auth.KeyInfo{}
			}
			return c.print(ks, []string{"NAME", "ORGANISATION", "PREFIX", "SUPPLIERS", "STATE"}, rows)
		})}
	revoke := &cobra.Command{Use: "revoke NAME", Short: "Revoke an API key and every token obtained with it", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			if err := auth.RevokeKey(ctx, d, args[0]); err != nil {
				return err
			}
			return c.done(map[string]string{"name": args[0], "state": "revoked"}, fmt.Sprintf("revoked API key %q", args[0]))
		})}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (c *cli) accountCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "Show an imported account, or mark accounts to be skipped by the migration"}
	skip := &cobra.Command{Use: "skip SUPPLIER EXTERNAL_ACCOUNT_NUMBER", Short: "Refuse staging of this account until unskipped", Args: cobra.ExactArgs(2),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			if err := admin.SkipAccount(ctx, d, args[0], args[1]); err != nil {
				return err
			}
			return c.done(map[string]any{"supplier": args[0], "external_account_number": args[1], "skipped": true},
				fmt.Sprintf("account %s of %s will be skipped", args[1], args[0]))
		})}
	unskip := &cobra.Command{Use: "unskip SUPPLIER EXTERNAL_ACCOUNT_NUMBER", Short: "Remove a skip mark", Args: cobra.ExactArgs(2),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			if err := admin.UnskipAccount(ctx, d, args[0], args[1]); err != nil {
				return err
			}
			return c.done(map[string]any{"supplier": args[0], "external_account_number": args[1], "skipped": false},
				fmt.Sprintf("account %s of %s is no longer skipped", args[1], args[0]))
		})}
	list := &cobra.Command{Use: "skipped SUPPLIER", Short: "List the accounts marked to be skipped", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			ss, err := admin.ListSkipped(ctx, d, args[0])
			if err != nil {
				return err
			}
			rows := make([][]string, len(ss))
			for i, s := range ss {
				rows[i] = []string{s.ExternalAccountNumber, s.CreatedAt.UTC().Format(time.RFC3339)}
			}
			return c.print(ss, []string{"EXTERNAL ACCOUNT NUMBER", "MARKED"}, rows)
		})}
	cmd.AddCommand(c.accountShowCmd(), skip, unskip, list)
	return cmd
}

// documentCmd places documents where E6 and E8 look for them, so that teams
// and tests need no object-store tooling of their own.
func (c *cli) documentCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "document", Short: "Place documents in the object store (reads DOCUMENTS_URL)"}
	put := &cobra.Command{Use: "put SUPPLIER PATH FILE", Short: "Upload FILE (- for stdin) as the document at PATH under the supplier's document root",
		Args: cobra.ExactArgs(3),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			supplier, path, file := args[0], args[1], args[2]
			if !documents.ValidPath(path) {
				return fmt.Errorf("PATH %q is not a normalised relative path (no leading /, no \\, no empty, . or .. segment)", path)
			}
			u := c.getenv("DOCUMENTS_URL")
			if u == "" {
				return fmt.Errorf("DOCUMENTS_URL: required but not set")
			}
			root, err := documents.SupplierRoot(ctx, d, supplier)
			if err != nil {
				return err
			}
			var r io.Reader = os.Stdin
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			store, err := documents.Open(ctx, u, c.log)
			if err != nil {
				return fmt.Errorf("DOCUMENTS_URL: %w", err)
			}
			defer store.Close()
			n := &countingReader{r: r}
			key, err := store.Put(ctx, root, path, n)
			if err != nil {
				return err
			}
			return c.done(map[string]any{"supplier": supplier, "path": path, "key": key, "bytes": n.n},
				fmt.Sprintf("uploaded %d bytes to %s", n.n, key))
		})}
	cmd.AddCommand(put)
	return cmd
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
