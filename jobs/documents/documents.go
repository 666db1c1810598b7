// Package documents is the object store that imported notes and historical
// statements refer to (spec 2.8). The interface never receives files: a
// migration team places them in the store first (importctl document put), and
// the import endpoints only check that a referenced document exists.
//
// A document's key is the import supplier's document root, a slash, then the
// path the caller gave without its leading slash, if any. Every supplier has
// a root of its own (suppliers/<code> unless the operator chose one), and no
// root lies inside or around another (the database's trigger on
// import_suppliers refuses it), so a supplier's paths can only name its own
// documents. A root that was the whole bucket, or that nested in another,
// would let one supplier's key reach another's documents.
//
// Whether a referenced document must exist is a per-supplier setting
// (import_suppliers.require_documents), off by default as on the reference
// platform; callers run Check only when it is on.
//
// The store is a gocloud.dev/blob bucket opened from a URL, so the same code
// runs on a directory (file://) locally and on S3 (s3://) in production. The
// URL schemes are registered by blank imports of the driver packages in cmd,
// which is the only place that decides which stores a binary supports.
package documents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// CodeInvalidPath is the problem code of a document path that is not a
// normalised relative path. It is the same code the account payload uses for
// its notes' document paths.
const CodeInvalidPath = "invalid_document_path"

// CodeNotFound is the problem code of a document path that names nothing in
// the store, the reference platform's code for it.
const CodeNotFound = "path_does_not_exist_in_file_store"

// CodeStoreNotConfigured (500) means DOCUMENTS_URL is not set, so a document
// reference cannot be checked.
const CodeStoreNotConfigured = "document_store_not_configured"

// CodeStoreUnavailable (500) means the store did not answer.
const CodeStoreUnavailable = "document_store_unavailable"

// MaxPathLength is the longest accepted path, in bytes. S3 keys are limited to
// 1024 bytes, root included; a longer key simply cannot exist.
const MaxPathLength = 1024

// ValidPath reports whether p is a normalised path relative to a supplier's
// document root: not empty, no backslash, no control character, and no
// empty, "." or ".." segment, so that it can never leave the root. One
// leading slash is allowed and changes nothing: the path is relative to the
// root either way (spec 2.8), so "/a/b.pdf" and "a/b.pdf" name the same
// document (see Clean).
func ValidPath(p string) bool {
	if len(p) > MaxPathLength {
		return false
	}
	p = Clean(p)
	if p == "" {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' || p[i] < 0x20 || p[i] == 0x7f {
			return false
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// PathProblem says what is wrong with p as a document path, for the detail
// of an invalid_document_path problem, or "" when ValidPath accepts it. The
// length limit is in bytes (an object key's limit), so a path within a
// schema's character limit can still be too long when it is not ASCII.
func PathProblem(p string) string {
	switch {
	case ValidPath(p):
		return ""
	case len(p) > MaxPathLength:
		return fmt.Sprintf("The path is %d bytes long in UTF-8; a document path has at most %d bytes.", len(p), MaxPathLength)
	}
	return fmt.Sprintf("%q is not a normalised path relative to the supplier's document root (no \\, no control character, no empty, . or .. segment).", p)
}

// Clean returns p without its leading slash: the spelling of a valid path
// that is stored and used as the key's tail.
func Clean(p string) string { return strings.TrimPrefix(p, "/") }

// Key returns the object key of path under root. Slashes around root are
// ignored, so that "acme/" and "acme" are the same root, and so is a leading
// slash of path.
func Key(root, path string) string {
	path = Clean(path)
	root = strings.Trim(root, "/")
	if root == "" {
		return path
	}
	return root + "/" + path
}

// DefaultRoot is the document root of a supplier created without one.
func DefaultRoot(supplierCode string) string { return "suppliers/" + supplierCode }

// CodeInvalidRoot is the problem code of a document root that is not a
// normalised relative path.
const CodeInvalidRoot = "invalid_document_root"

// CodeRootOverlap is the problem code of a document root inside, or around,
// another supplier's root.
const CodeRootOverlap = "document_root_overlap"

// CleanRoot returns root without the slashes around it, the spelling that
// is stored, or a *problem.Error (CodeInvalidRoot, attr document_root) when
// it is empty or not a normalised path (see ValidPath).
func CleanRoot(root string) (string, error) {
	r := strings.Trim(root, "/")
	if r == "" || !ValidPath(r) {
		return "", problem.Invalidf(CodeInvalidRoot, "document_root",
			"Document root %q must be a normalised path such as suppliers/ACME (no \\, no empty, . or .. segment).", root)
	}
	return r, nil
}

// Store is a bucket of documents. Its methods are safe for concurrent use.
type Store struct {
	bucket *blob.Bucket
	// local is true for a file:// bucket, whose keys are file names and can
	// fail in ways an object store cannot (see Exists); dir is its
	// directory.
	local bool
	dir   string
	// log reports a store that did not answer (Check).
	log *slog.Logger
}

// Open opens the bucket at rawURL (a gocloud.dev/blob URL such as
// file:///var/lib/importd/documents or s3://bucket?region=eu-west-2). The
// scheme's driver must be registered by a blank import. Close the store when
// done. log reports a store that did not answer; it must not be nil.
func Open(ctx context.Context, rawURL string, log *slog.Logger) (*Store, error) {
	if log == nil {
		panic("documents.Open: nil *slog.Logger")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("documents: %w", err)
	}
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("documents: open %s bucket: %w", u.Scheme, err)
	}
	st := &Store{bucket: b, local: u.Scheme == "file", log: log}
	if st.local {
		if st.dir, err = filepath.Abs(filepath.FromSlash(u.Path)); err != nil {
			b.Close()
			return nil, fmt.Errorf("documents: %w", err)
		}
	}
	return st, nil
}

// insideRoot reports whether the file of key in a file:// bucket, once
// every symbolic link on its way is resolved, lies under the directory of
// root. The paths are checked for ".." (ValidPath), but a link in one
// supplier's directory to another's let the first ask whether the
// second's documents exist (and importctl document put write there). A
// key that does not exist yet is judged by its nearest existing directory.
func (s *Store) insideRoot(root, key string) (bool, error) {
	rootDir := filepath.Join(s.dir, filepath.FromSlash(strings.Trim(root, "/")))
	p := filepath.Join(s.dir, filepath.FromSlash(key))
	for {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return false, err
		}
		if p == rootDir || len(p) <= len(s.dir) {
			return true, nil // nothing exists below the root: no link to follow
		}
		p = filepath.Dir(p)
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // a dangling link
	}
	if err != nil {
		return false, err
	}
	realRoot, err := filepath.EvalSymlinks(rootDir)
	if err != nil {
		return false, err
	}
	return real == realRoot || strings.HasPrefix(real, realRoot+string(filepath.Separator)), nil
}

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Exists reports whether the document at path under root exists. An error
// means the store could not answer (unreachable, access denied), never that
// the caller's path is wrong: a key the store cannot hold does not exist.
func (s *Store) Exists(ctx context.Context, root, path string) (bool, error) {
	key := Key(root, path)
	if len(key) > MaxPathLength {
		return false, nil
	}
	if s.local {
		inside, err := s.insideRoot(root, key)
		if err != nil && !unholdableLocalKey(key, err) {
			return false, fmt.Errorf("documents: exists %q: %w", key, err)
		}
		if !inside {
			return false, nil
		}
	}
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil && s.local && unholdableLocalKey(key, err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("documents: exists %q: %w", key, err)
	}
	return ok, nil
}

// unholdableLocalKey recognises the keys that a file:// bucket refuses with an
// error instead of "not found": a path through a file ("a.pdf/b"), a segment
// longer than the file system allows, and names ending in ".attrs", which
// fileblob reserves for its metadata files. Without this a caller's typo
// would become a 500.
func unholdableLocalKey(key string, err error) bool {
	return errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) ||
		errors.Is(err, syscall.EINVAL) || strings.HasSuffix(key, ".attrs")
}

// Put writes the contents of r as the document at path under root,
// replacing any document already there, and returns its key. An invalid
// path is a *problem.Error with code invalid_document_path.
func (s *Store) Put(ctx context.Context, root, path string, r io.Reader) (key string, err error) {
	if !ValidPath(path) {
		return "", problem.Invalidf(CodeInvalidPath, "path",
			"%q is not a normalised path relative to the supplier's document root (no \\, no empty, . or .. segment).", path)
	}
	key = Key(root, path)
	if s.local {
		inside, err := s.insideRoot(root, key)
		if err != nil {
			return "", fmt.Errorf("documents: put %q: %w", key, err)
		}
		if !inside {
			return "", problem.Invalidf(CodeInvalidPath, "path",
				"%q leads out of the supplier's document root through a symbolic link.", path)
		}
	}
	w, err := s.bucket.NewWriter(ctx, key, nil)
	if err != nil {
		return "", fmt.Errorf("documents: put %q: %w", key, err)
	}
	if _, err := io.Copy(w, r); err != nil {
		_ = w.Close()
		return "", fmt.Errorf("documents: put %q: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("documents: put %q: %w", key, err)
	}
	return key, nil
}

// checkParallelism bounds the existence checks one request runs at once: an
// object store answers each in a round trip, and a note with many documents
// should not take one round trip per document in sequence, nor open
// hundreds of connections.
const checkParallelism = 8

// Missing returns those of paths (under root) that do not exist, in the order
// given, each once and in its Clean spelling. The paths must be valid.
func (s *Store) Missing(ctx context.Context, root string, paths []string) ([]string, error) {
	var unique []string
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		p = Clean(p)
		if !seen[p] {
			seen[p] = true
			unique = append(unique, p)
		}
	}
	found := make([]bool, len(unique))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(checkParallelism)
	for i, p := range unique {
		g.Go(func() error {
			ok, err := s.Exists(gctx, root, p)
			found[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var missing []string
	for i, p := range unique {
		if !found[i] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// SupplierRoot returns the document root of the import supplier with this
// code, or a *problem.Error of Kind NotFound (import_supplier_not_found).
func SupplierRoot(ctx context.Context, d *db.DB, code string) (string, error) {
	var root string
	err := d.GetContext(ctx, &root, `SELECT document_root FROM import_suppliers WHERE code = $1`, code)
	if errors.Is(err, db.ErrNotFound) {
		return "", problem.New(problem.NotFound, "import_supplier_not_found", fmt.Sprintf("Import supplier %s does not exist.", code))
	}
	if err != nil {
		return "", fmt.Errorf("documents: supplier root: %w", err)
	}
	return root, nil
}

// Ref is a document path at its place in a request (its attr).
type Ref struct {
	Attr string
	Path string
}

// Check adds a CodeNotFound problem to errs for each of refs whose document
// does not exist under root; the paths must be valid. Callers run it only
// for a supplier that requires documents. s may be nil (no
// DOCUMENTS_URL): with references to check, that is a *problem.Error of Kind
// Unavailable, as is a store that cannot answer. Neither is a verdict on the
// caller's data.
//
// E5 (the account payload's notes), E6 and E8 all check their references
// here, so a document is judged the same way whichever endpoint names it.
func Check(ctx context.Context, s *Store, root string, refs []Ref, errs *problem.List) error {
	if len(refs) == 0 {
		return nil
	}
	if s == nil {
		return problem.New(problem.Unavailable, CodeStoreNotConfigured,
			"This service has no document store (DOCUMENTS_URL), so document references cannot be checked.")
	}
	paths := make([]string, len(refs))
	for i, r := range refs {
		paths[i] = r.Path
	}
	missing, err := s.Missing(ctx, root, paths)
	if err != nil {
		// The HTTP layer logs only internal errors; this cause is what an
		// operator needs to fix the store, so it is logged here.
		s.log.WarnContext(ctx, "document store did not answer", "error", err.Error())
		return &problem.Error{Kind: problem.Unavailable, Code: CodeStoreUnavailable,
			Detail: "The document store did not answer; retry later.", Cause: err}
	}
	gone := make(map[string]bool, len(missing))
	for _, p := range missing {
		gone[p] = true
	}
	for _, r := range refs {
		if gone[Clean(r.Path)] {
			errs.Add(r.Attr, CodeNotFound,
				"No document %q exists in the import supplier's document store; upload it first (importctl document put).", r.Path)
		}
	}
	return nil
}
