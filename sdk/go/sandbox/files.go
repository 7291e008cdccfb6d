package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// FileType is the type of a directory entry.
type FileType string

const (
	FileTypeFile      FileType = "file"
	FileTypeDirectory FileType = "directory"
	FileTypeOther     FileType = "other"
)

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name    string
	Size    int64
	Type    FileType
	ModTime time.Time
	Mode    string // octal permission bits, e.g. "0644"
}

// IsDir reports whether the entry is a directory.
func (e FileEntry) IsDir() bool { return e.Type == FileTypeDirectory }

// Files reaches the sandbox's file system (paths are relative to sandboxd's root,
// /workspace by default; a leading "/" means that root).
type Files struct{ s *Sandbox }

// Files returns the file API of the sandbox.
func (s *Sandbox) Files() *Files { return &Files{s: s} }

func (f *Files) do(ctx context.Context, cl call) (*http.Response, error) {
	resp, _, err := f.s.send(ctx, cl)
	return resp, err
}

// Read opens the file at path for streaming. The caller closes the reader. Without a
// context deadline, Options.DefaultTimeout bounds the wait for the answer's head, not
// the reading of the body (ReadFile's is bounded by it without progress). A Read of the
// reader that waits Options.StreamIdleTimeout for a byte fails with a *StreamIdleError
// (the time between reads does not count).
func (f *Files) Read(ctx context.Context, path string) (io.ReadCloser, error) {
	return f.read(ctx, path, limitHead)
}

// read is Read under the default limit of kind.
func (f *Files) read(ctx context.Context, path string, kind limitKind) (io.ReadCloser, error) {
	p, err := fileContentPath(path)
	if err != nil {
		return nil, err
	}
	resp, err := f.do(ctx, call{op: "read " + path, method: http.MethodGet, path: p, idempotent: true,
		limit: kind})
	if err != nil {
		return nil, err
	}
	if isJSON(resp) {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s", ErrIsDirectory, path)
	}
	return resp.Body, nil
}

// ReadFile reads the whole file at path (at most the client's MaxReadSize).
func (f *Files) ReadFile(ctx context.Context, path string) ([]byte, error) {
	rc, err := f.read(ctx, path, limitIdle)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	max := f.s.c.maxRead
	b, err := io.ReadAll(io.LimitReader(rc, plusOne(max)))
	if err != nil {
		return nil, fmt.Errorf("sandbox: read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is over %d bytes (use Read)", ErrTooLarge, path, max)
	}
	return b, nil
}

// WriteOption customizes Write, WriteFile and Create.
type WriteOption func(*url.Values)

// WithMode sets the permission bits of the written file (default 0644).
func WithMode(m fs.FileMode) WriteOption {
	return func(q *url.Values) { q.Set("mode", fmt.Sprintf("0%03o", m.Perm())) }
}

func writeQuery(opts []WriteOption) url.Values {
	q := url.Values{}
	for _, o := range opts {
		o(&q)
	}
	return q
}

// Write streams r into the file at path (parents are created; the file is replaced
// atomically once complete). The body is sent chunked; no retries. Without a context
// deadline, Options.DefaultTimeout bounds what the request waits for on the network
// (connecting, the peer taking a chunk, the answer after the body), not the time r
// takes.
func (f *Files) Write(ctx context.Context, path string, r io.Reader, opts ...WriteOption) error {
	p, err := fileContentPath(path)
	if err != nil {
		return err
	}
	resp, err := f.do(ctx, call{op: "write " + path, method: http.MethodPut, path: p, query: writeQuery(opts),
		stream: r, contentType: "application/octet-stream", limit: limitHead})
	if err != nil {
		return err
	}
	return drain(resp)
}

// WriteFile writes data to the file at path (retried when sandboxd was not reached).
func (f *Files) WriteFile(ctx context.Context, path string, data []byte, opts ...WriteOption) error {
	p, err := fileContentPath(path)
	if err != nil {
		return err
	}
	if data == nil {
		data = []byte{}
	}
	resp, err := f.do(ctx, call{op: "write " + path, method: http.MethodPut, path: p, query: writeQuery(opts),
		body: data, contentType: "application/octet-stream", idempotent: true, limit: limitIdle})
	if err != nil {
		return err
	}
	return drain(resp)
}

// Create returns a writer that streams into the file at path; Close finishes the
// upload and returns its result. Abandoning the writer without Close leaks the upload
// until ctx ends.
func (f *Files) Create(ctx context.Context, path string, opts ...WriteOption) (io.WriteCloser, error) {
	if _, err := fileContentPath(path); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	w := &fileWriter{pw: pw, done: make(chan error, 1)}
	go func() {
		err := f.Write(ctx, path, pr, opts...)
		pr.CloseWithError(errWriterDone(err))
		w.done <- err
	}()
	return w, nil
}

func errWriterDone(err error) error {
	if err == nil {
		return io.ErrClosedPipe
	}
	return err
}

type fileWriter struct {
	pw   *io.PipeWriter
	done chan error
	once sync.Once
	err  error
}

func (w *fileWriter) Write(b []byte) (int, error) { return w.pw.Write(b) }

// Close ends the upload and returns its result (the same result on every call).
func (w *fileWriter) Close() error {
	w.once.Do(func() {
		_ = w.pw.Close()
		w.err = <-w.done
	})
	return w.err
}

// MaxListEntries caps what List returns: a listing past this many entries (each page
// counts as at least one) fails with ErrTooLarge. It bounds the memory a listing takes
// (sandboxd's pages hold 10,000 names, so a directory of a million files still lists).
const MaxListEntries = 1_000_000

// maxListEntries is MaxListEntries (a variable for tests).
var maxListEntries = MaxListEntries

// List lists the directory at path ("" or "/" is the root), sorted by name. A directory
// larger than one of sandboxd's listing pages (10,000 names) is read page by page, each
// page after the last name of the one before, so every name comes once; names created
// or removed meanwhile may or may not be seen. A continue token that comes a second
// time (the pages would go round for ever) is an error, and so is a listing of more
// than MaxListEntries entries (ErrTooLarge).
func (f *Files) List(ctx context.Context, path string) ([]FileEntry, error) {
	p, err := filesPath(path, true)
	if err != nil {
		return nil, err
	}
	var out []FileEntry
	seen := map[[sha256.Size]byte]bool{} // the tokens asked with (hashed: a token may be long)
	token, charged := "", 0
	for {
		page, next, err := f.listPage(ctx, path, p, token)
		if err != nil {
			return nil, err
		}
		if charged += max(len(page), 1); charged > maxListEntries {
			return nil, fmt.Errorf("%w: list %s: over %d entries", ErrTooLarge, path, maxListEntries)
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		h := sha256.Sum256([]byte(next))
		if seen[h] {
			return nil, fmt.Errorf("sandbox: list %s: bad response: the continue token %.64q came again "+
				"(the pages would go round)", path, next)
		}
		seen[h] = true
		token = next
	}
}

// listPage reads one listing page (after token, unless ""): its entries and the token of
// the next page ("" for the last).
func (f *Files) listPage(ctx context.Context, path, p, token string) ([]FileEntry, string, error) {
	var q url.Values
	if token != "" {
		q = url.Values{"continue": {token}}
	}
	resp, err := f.do(ctx, call{op: "list " + path, method: http.MethodGet, path: p, query: q, idempotent: true})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if !isJSON(resp) {
		return nil, "", fmt.Errorf("%w: %s", ErrNotDirectory, path)
	}
	var l struct {
		Entries []struct {
			Name       string `json:"name"`
			Size       int64  `json:"size"`
			Type       string `json:"type"`
			ModifiedAt string `json:"modified_at"`
			Mode       string `json:"mode"`
		} `json:"entries"`
		Continue string `json:"continue"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(&l); err != nil {
		return nil, "", fmt.Errorf("sandbox: list %s: bad response: %w", path, err)
	}
	out := make([]FileEntry, 0, len(l.Entries))
	for _, e := range l.Entries {
		mt, _ := time.Parse(time.RFC3339, e.ModifiedAt)
		out = append(out, FileEntry{Name: e.Name, Size: e.Size, Type: FileType(e.Type), ModTime: mt, Mode: e.Mode})
	}
	return out, l.Continue, nil
}

// Exists reports whether path exists: a stat (GET /v1/stat) that sandboxd answers, or
// its 404 NOT_FOUND. A 404 of the router (a Sandbox its cache does not know) or of the
// API server's pod proxy (no pod) is an error, not "no such file": a HEAD's answer has
// no body to tell them apart.
func (f *Files) Exists(ctx context.Context, path string) (bool, error) {
	_, err := f.Stat(ctx, path)
	if err == nil {
		return true, nil
	}
	if sandboxdStatus(err) == http.StatusNotFound {
		return false, nil
	}
	return false, err
}

// Delete removes the file or directory at path; a non-empty directory needs
// recursive (else ErrConflict). The root is named only by an explicit "/" with
// recursive: Delete(ctx, "/", true) empties the whole workspace; "", "." and other
// spellings of the root are ErrInvalidPath, recursive or not. A missing path is
// ErrNotFound, except on a retry after an attempt whose answer was lost (a cut
// connection, a proxy's 502/503/504): that attempt may have deleted it, and Delete
// succeeds. A path that ends with "/" deletes only a directory (a Stat first; a file
// there is ErrNotFound and stays).
func (f *Files) Delete(ctx context.Context, path string, recursive bool) error {
	p, err := filesPath(path, recursive && path == "/")
	if err != nil {
		return err
	}
	if dirOnly(path) { // a directory's name by its form: never the file before the slash
		if _, err := f.Stat(ctx, path); err != nil {
			return err
		}
	}
	q := url.Values{}
	if recursive {
		q.Set("recursive", "true")
	}
	var mayHaveRun bool
	resp, err := f.do(ctx, call{op: "delete " + path, method: http.MethodDelete, path: p, query: q,
		idempotent: true, mayHaveRun: &mayHaveRun})
	if err != nil {
		if mayHaveRun && sandboxdStatus(err) == http.StatusNotFound {
			return nil
		}
		return err
	}
	return drain(resp)
}

// plusOne is n+1 for a read limit that must see one byte past n, without wrapping.
func plusOne(n int64) int64 {
	if n == math.MaxInt64 {
		return n
	}
	return n + 1
}

func isJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json"
}

func drain(resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}
