package sandbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// FileTypeSymlink is the type Stat reports for a symbolic link (not followed unless
// FollowSymlinks is given).
const FileTypeSymlink FileType = "symlink"

// FileStat describes one path (lstat semantics: a symlink is described, not followed;
// with FollowSymlinks, what the link leads to).
type FileStat struct {
	Name          string
	Path          string // from the root, starting with "/"
	Type          FileType
	Size          int64
	Mode          string // octal permission bits, e.g. "0644"
	ModTime       time.Time
	SymlinkTarget string // the link's target as stored, for FileTypeSymlink
}

// IsDir reports whether the path is a directory.
func (s FileStat) IsDir() bool { return s.Type == FileTypeDirectory }

type statJSON struct {
	Name          string `json:"name"`
	Path          string `json:"path"`
	Type          string `json:"type"`
	Size          int64  `json:"size"`
	Mode          string `json:"mode"`
	MTime         string `json:"mtime"`
	SymlinkTarget string `json:"symlink_target"`
}

func (j statJSON) stat() *FileStat {
	t, _ := time.Parse(time.RFC3339Nano, j.MTime)
	return &FileStat{Name: j.Name, Path: j.Path, Type: FileType(j.Type), Size: j.Size, Mode: j.Mode,
		ModTime: t, SymlinkTarget: j.SymlinkTarget}
}

// apiPath is the escaped request path of p under prefix ("/v1/stat"); the root is
// prefix + "/".
func apiPath(prefix, p string, allowRoot bool) (string, error) {
	segs, err := cleanPath(p, allowRoot)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('/')
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// decodeJSON decodes a small JSON answer into v and closes the body.
func decodeJSON(resp *http.Response, op string, v any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(v); err != nil {
		return fmt.Errorf("sandbox: %s: bad response: %w", op, err)
	}
	return nil
}

// StatOption customizes Stat.
type StatOption func(*url.Values)

// FollowSymlinks makes Stat describe what a symlink leads to instead of the link
// (GET /v1/stat/{path}?follow=true): every link, the last one too, is resolved beneath
// the sandbox's root as the parents are. The answer is never FileTypeSymlink and has no
// SymlinkTarget; Path and Name stay the ones asked for. A link that leads out of the
// root, or a loop of links, is ErrForbidden (sandboxd's 403, as for any escape); a
// dangling link is ErrNotFound.
func FollowSymlinks() StatOption {
	return func(q *url.Values) { q.Set("follow", "true") }
}

func statQuery(opts []StatOption) url.Values {
	q := url.Values{}
	for _, o := range opts {
		o(&q)
	}
	return q
}

// Stat describes path ("" or "/" is the root): a symlink itself, unless
// FollowSymlinks. A path that ends with "/" (or "/.") names a directory, as in path
// resolution: its links are followed and anything else there is ErrNotFound.
func (f *Files) Stat(ctx context.Context, path string, opts ...StatOption) (*FileStat, error) {
	p, err := apiPath("/v1/stat", path, true)
	if err != nil {
		return nil, err
	}
	dir := dirOnly(path)
	if dir {
		opts = append(opts[:len(opts):len(opts)], FollowSymlinks())
	}
	op := "stat " + path
	resp, err := f.do(ctx, call{op: op, method: http.MethodGet, path: p, query: statQuery(opts), idempotent: true})
	if err != nil {
		return nil, err
	}
	var j statJSON
	if err := decodeJSON(resp, op, &j); err != nil {
		return nil, err
	}
	st := j.stat()
	if dir && !st.IsDir() {
		return nil, notADirectory(op)
	}
	return st, nil
}

// Mkdir creates the directory path (0755 unless WithMode). With parents, missing
// parents are created and an existing directory is fine; without, they are ErrNotFound
// and ErrConflict. Something else in the way is ErrConflict. A conflict on a retry
// after an attempt whose answer was lost (a cut connection, a proxy's 502/503/504) is
// success when a stat shows a directory: that attempt may have created it.
func (f *Files) Mkdir(ctx context.Context, path string, parents bool, opts ...WriteOption) (*FileStat, error) {
	p, err := apiPath("/v1/mkdir", path, false)
	if err != nil {
		return nil, err
	}
	q := writeQuery(opts)
	q.Set("parents", strconv.FormatBool(parents))
	op := "mkdir " + path
	var mayHaveRun bool
	resp, err := f.do(ctx, call{op: op, method: http.MethodPost, path: p, query: q, idempotent: true,
		mayHaveRun: &mayHaveRun})
	if err != nil {
		if mayHaveRun && sandboxdStatus(err) == http.StatusConflict {
			return f.madeBefore(ctx, path, err)
		}
		return nil, err
	}
	var j statJSON
	if err := decodeJSON(resp, op, &j); err != nil {
		return nil, err
	}
	return j.stat(), nil
}

// madeBefore is Mkdir's answer to a conflict that an earlier attempt may have caused:
// the directory's stat when path is a directory, else err.
func (f *Files) madeBefore(ctx context.Context, path string, err error) (*FileStat, error) {
	st, serr := f.Stat(ctx, path)
	if serr != nil || !st.IsDir() {
		return nil, err
	}
	return st, nil
}

// Move renames from to to (both beneath the root; to's parent must exist). Without
// overwrite an existing destination is ErrConflict; a directory cannot move into itself
// (ErrInvalidArgument). When from or to ends with "/" only a directory moves: a file
// (checked with a Stat first) is ErrNotFound.
func (f *Files) Move(ctx context.Context, from, to string, overwrite bool) error {
	for _, p := range []string{from, to} {
		if _, err := cleanPath(p, false); err != nil {
			return err
		}
	}
	if dirOnly(from) || dirOnly(to) { // only a directory moves to or from such a path
		st, err := f.Stat(ctx, from)
		if err == nil && !st.IsDir() {
			err = notADirectory("move " + from + " to " + to)
		}
		if err != nil {
			return err
		}
	}
	body, _ := json.Marshal(map[string]any{"from": from, "to": to, "overwrite": overwrite})
	resp, err := f.do(ctx, call{op: "move " + from + " to " + to, method: http.MethodPost, path: "/v1/move",
		body: body, contentType: "application/json"})
	if err != nil {
		return err
	}
	return drain(resp)
}

// BatchFile is one file of WriteMany.
type BatchFile struct {
	Path string
	Data []byte
	Mode fs.FileMode // 0: 0644
}

// WriteResult is the outcome of one file of WriteMany.
type WriteResult struct {
	Path    string
	OK      bool
	Size    int64
	Status  int    // HTTP status of a failure
	Code    string // API code of a failure ("PERMISSION_DENIED", ...)
	Message string
}

// Err is nil for a written file, else an *HTTPError (errors.Is works with ErrNotFound,
// ErrForbidden, ErrConflict, ErrInvalidArgument).
func (r WriteResult) Err() error {
	if r.OK {
		return nil
	}
	return &HTTPError{Op: "write " + r.Path, StatusCode: r.Status, Code: r.Code, Message: r.Message}
}

// WriteMany writes several files in one request (bounded by sandboxd's --max-body),
// each atomically (a temporary file renamed into place). The results are in order; a
// failed file does not stop the others.
func (f *Files) WriteMany(ctx context.Context, files []BatchFile) ([]WriteResult, error) {
	type entry struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Mode    string `json:"mode,omitempty"`
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: WriteMany needs at least one file", ErrInvalidArgument)
	}
	req := struct {
		Files []entry `json:"files"`
	}{}
	for _, bf := range files {
		if _, err := fileContentPath(bf.Path); err != nil {
			return nil, err
		}
		e := entry{Path: bf.Path, Content: base64.StdEncoding.EncodeToString(bf.Data)}
		if bf.Mode != 0 {
			e.Mode = fmt.Sprintf("0%03o", bf.Mode.Perm())
		}
		req.Files = append(req.Files, e)
	}
	body, _ := json.Marshal(req)
	resp, err := f.do(ctx, call{op: "write many", method: http.MethodPost, path: "/v1/files:batch",
		body: body, contentType: "application/json", idempotent: true, limit: limitIdle})
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []struct {
			Path    string `json:"path"`
			OK      bool   `json:"ok"`
			Size    int64  `json:"size"`
			Status  int    `json:"status"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"results"`
	}
	if err := decodeJSON(resp, "write many", &out); err != nil {
		return nil, err
	}
	res := make([]WriteResult, len(out.Results))
	for i, r := range out.Results {
		res[i] = WriteResult{Path: r.Path, OK: r.OK, Size: r.Size, Status: r.Status, Code: r.Code, Message: r.Message}
	}
	return res, nil
}

// Range is the answer of ReadRange.
type Range struct {
	Data      []byte
	Offset    int64
	Size      int64 // the whole file's size
	Truncated bool  // maxBytes cut the read before the end of the file
}

// ReadRange reads at most maxBytes (< 0: up to the client's MaxReadSize) from offset.
// Reading at or past the end gives empty Data.
func (f *Files) ReadRange(ctx context.Context, path string, offset, maxBytes int64) (*Range, error) {
	p, err := fileContentPath(path)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("%w: negative offset", ErrInvalidArgument)
	}
	if maxBytes < 0 || maxBytes > f.s.c.maxRead {
		maxBytes = f.s.c.maxRead
	}
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "max_bytes": {strconv.FormatInt(maxBytes, 10)}}
	op := "read " + path
	resp, err := f.do(ctx, call{op: op, method: http.MethodGet, path: p, query: q, idempotent: true,
		limit: limitIdle})
	var ae *HTTPError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		return &Range{Offset: offset}, nil
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if isJSON(resp) {
		return nil, fmt.Errorf("%w: %s", ErrIsDirectory, path)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, plusOne(maxBytes)))
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", op, err)
	}
	size, _ := strconv.ParseInt(resp.Header.Get("X-File-Size"), 10, 64)
	return &Range{Data: data, Offset: offset, Size: size, Truncated: resp.Header.Get("X-Truncated") == "true"}, nil
}

// FileEventType is the kind of a FileEvent.
type FileEventType string

const (
	FileCreated  FileEventType = "create"
	FileModified FileEventType = "modify"
	FileDeleted  FileEventType = "delete"
	FileMoved    FileEventType = "move"      // From and To are set
	FileMovedOut FileEventType = "move_from" // moved out of the watched tree
	FileMovedIn  FileEventType = "move_to"   // moved into the watched tree
	// WatchOverflow: events were dropped (Lost of them; -1 when the kernel's queue
	// overflowed and the count is unknown).
	WatchOverflow FileEventType = "overflow"
	// WatchError: a problem that does not end the watch (Message says which).
	WatchError FileEventType = "error"
)

// FileEvent is one event of a Watcher. Paths are relative to the watched directory
// ("" is the directory itself).
type FileEvent struct {
	Type    FileEventType
	Path    string
	IsDir   bool
	From    string
	To      string
	Lost    int64
	Message string
}

func parseFileEvent(line []byte) (FileEvent, error) {
	var j struct {
		Type    string `json:"type"`
		Path    string `json:"path"`
		IsDir   bool   `json:"is_dir"`
		From    string `json:"from"`
		To      string `json:"to"`
		Lost    *int64 `json:"lost"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(line, &j); err != nil {
		return FileEvent{}, fmt.Errorf("bad event: %w", err)
	}
	ev := FileEvent{Type: FileEventType(j.Type), Path: j.Path, IsDir: j.IsDir, From: j.From, To: j.To,
		Message: j.Message}
	if ev.Type == WatchOverflow {
		ev.Lost = -1
		if j.Lost != nil {
			ev.Lost = *j.Lost
		}
	}
	return ev, nil
}

// WatchOptions configure Watch.
type WatchOptions struct {
	Recursive bool // subdirectories too (new ones are added as they appear)
	Queue     int  // events held for a slow reader, 16..65536; 0: sandboxd's default
}

// Watcher is a directory watch stream. Next returns events in order; Close ends it.
type Watcher struct {
	ctx    context.Context // the watch's: ends with the caller's context or Close
	body   io.ReadCloser
	br     *ndjsonReader
	cancel context.CancelFunc
	done   atomic.Bool
}

// Watch starts watching the directory path; events that happen after it returns are
// reported. The watch lasts until Close, ctx's end, or the directory's deletion.
// Without a context deadline, Options.DefaultTimeout bounds its start (until the
// stream's first byte), not the watch. A quiet watch gets an empty line from sandboxd
// every 15 s: one silent for Options.StreamIdleTimeout is a dead connection, and Next
// returns a *StreamIdleError (watch again to go on).
func (f *Files) Watch(ctx context.Context, path string, opts WatchOptions) (*Watcher, error) {
	p, err := apiPath("/v1/watch", path, true)
	if err != nil {
		return nil, err
	}
	q := url.Values{"recursive": {strconv.FormatBool(opts.Recursive)}}
	if opts.Queue != 0 {
		q.Set("queue", strconv.Itoa(opts.Queue))
	}
	wctx, cancel := context.WithCancel(ctx)
	resp, err := f.do(wctx, call{op: "watch " + path, method: http.MethodGet, path: p, query: q, idempotent: true,
		limit: limitFirstByte})
	if err != nil {
		cancel()
		return nil, err
	}
	w := &Watcher{ctx: wctx, body: resp.Body, br: newNDJSONReader(resp.Body, maxEventLine), cancel: cancel}
	first, err := w.next()
	if err == nil && first != "ready" {
		err = fmt.Errorf("first event is %q, not ready", first)
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sandbox: watch %s: %w", path, err)
	}
	return w, nil
}

// next reads one line and returns its type.
func (w *Watcher) next() (string, error) {
	var j struct {
		Type string `json:"type"`
	}
	if err := w.br.decode(&j); err != nil {
		return "", err
	}
	return j.Type, nil
}

// Next blocks for the next event. It returns io.EOF once the stream ended (the
// directory was deleted, sandboxd shut down, or Close was called), the context's error
// (context.Canceled, context.DeadlineExceeded) once the context given to Watch ended,
// and an error wrapping io.ErrUnexpectedEOF when it was cut (a proxy's timeout, a lost
// connection): watch again to go on. An event line over 1 MiB is an error matching
// ErrTooLarge; the next Next skips the rest of that line and returns the event after it.
func (w *Watcher) Next() (FileEvent, error) {
	for {
		line, err := w.br.line()
		switch {
		case err != nil && w.done.Load():
			err = io.EOF
		case err != nil && w.ctx != nil && w.ctx.Err() != nil:
			err = w.ctx.Err()
		}
		if err != nil {
			return FileEvent{}, err
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		return parseFileEvent(line)
	}
}

// Close ends the watch (sandboxd drops it when the connection goes).
func (w *Watcher) Close() error {
	w.done.Store(true)
	w.cancel()
	return w.body.Close()
}
