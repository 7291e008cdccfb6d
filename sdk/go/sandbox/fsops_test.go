package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAPIPath(t *testing.T) {
	tests := []struct {
		prefix, in string
		allowRoot  bool
		want       string
		wantErr    bool
	}{
		{"/v1/stat", "", true, "/v1/stat/", false},
		{"/v1/stat", "/", true, "/v1/stat/", false},
		{"/v1/stat", "a b/c", false, "/v1/stat/a%20b/c", false},
		{"/v1/mkdir", "/x//y/./z", false, "/v1/mkdir/x/y/z", false},
		{"/v1/mkdir", "", false, "", true},
		{"/v1/watch", "a/../..", true, "", true},
		{"/v1/watch", "a\nb", true, "", true},
	}
	for _, tt := range tests {
		got, err := apiPath(tt.prefix, tt.in, tt.allowRoot)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("apiPath(%q, %q) = %q, %v; want %q, err %v", tt.prefix, tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseFileEvent(t *testing.T) {
	tests := []struct {
		line    string
		want    FileEvent
		wantErr bool
	}{
		{`{"type":"create","path":"a","is_dir":false}`, FileEvent{Type: FileCreated, Path: "a"}, false},
		{`{"type":"move","path":"b","from":"a","to":"b","is_dir":true}`,
			FileEvent{Type: FileMoved, Path: "b", From: "a", To: "b", IsDir: true}, false},
		{`{"type":"overflow","lost":12}`, FileEvent{Type: WatchOverflow, Lost: 12}, false},
		{`{"type":"overflow","lost":null}`, FileEvent{Type: WatchOverflow, Lost: -1}, false},
		{`{"type":"error","message":"m"}`, FileEvent{Type: WatchError, Message: "m"}, false},
		{`{"type":`, FileEvent{}, true},
	}
	for _, tt := range tests {
		got, err := parseFileEvent([]byte(tt.line))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseFileEvent(%s) = %+v, %v; want %+v, err %v", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestFsopsStatQuery(t *testing.T) {
	tests := []struct {
		name string
		opts []StatOption
		want string
	}{
		{"none", nil, ""},
		{"follow", []StatOption{FollowSymlinks()}, "follow=true"},
		{"twice", []StatOption{FollowSymlinks(), FollowSymlinks()}, "follow=true"},
	}
	for _, tt := range tests {
		if got := statQuery(tt.opts).Encode(); got != tt.want {
			t.Errorf("%s: statQuery = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestLocalFsops runs the filesystem operations against a local sandboxd in every mode
// (the watch stream goes through the router and pod-proxy forwarders as well).
func TestLocalFsops(t *testing.T) {
	for _, mode := range []Mode{ModeDirect, ModeRouter, ModePodProxy} {
		t.Run(string(mode), func(t *testing.T) {
			sb := localSandbox(t, mode)
			t.Run("StatMkdirMove", func(t *testing.T) { fsopsStatMkdirMove(t, sb) })
			t.Run("StatFollow", func(t *testing.T) { fsopsStatFollow(t, sb) })
			t.Run("BatchAndRanges", func(t *testing.T) { fsopsBatchRanges(t, sb) })
			t.Run("Watch", func(t *testing.T) { fsopsWatch(t, sb) })
		})
	}
}

func fsopsStatMkdirMove(t *testing.T, sb *Sandbox) {
	ctx, f := testCtx(t), sb.Files()
	st, err := f.Mkdir(ctx, "m/a/b", true, WithMode(0o750))
	if err != nil || !st.IsDir() || st.Path != "/m/a/b" || st.Mode != "0750" {
		t.Fatalf("Mkdir = %+v, %v", st, err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"mkdir existing without parents", func() error { _, e := f.Mkdir(ctx, "m/a/b", false); return e }(), ErrConflict},
		{"mkdir missing parent", func() error { _, e := f.Mkdir(ctx, "m/x/y", false); return e }(), ErrNotFound},
		{"stat missing", func() error { _, e := f.Stat(ctx, "m/none"); return e }(), ErrNotFound},
		{"move missing", f.Move(ctx, "m/none", "m/x", false), ErrNotFound},
		{"move into itself", f.Move(ctx, "m/a", "m/a/b/c", false), ErrInvalidArgument},
		{"move the root", f.Move(ctx, "/", "m/x", false), ErrInvalidPath},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	if err := f.WriteFile(ctx, "m/f.txt", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	if st, err := f.Stat(ctx, "m/f.txt"); err != nil || st.Size != 5 || st.Type != FileTypeFile || st.ModTime.IsZero() {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	if err := f.WriteFile(ctx, "m/g.txt", []byte("g")); err != nil {
		t.Fatal(err)
	}
	if err := f.Move(ctx, "m/f.txt", "m/g.txt", false); !errors.Is(err, ErrConflict) {
		t.Fatalf("Move onto existing = %v, want ErrConflict", err)
	}
	if err := f.Move(ctx, "m/f.txt", "m/g.txt", true); err != nil {
		t.Fatal(err)
	}
	if b, err := f.ReadFile(ctx, "m/g.txt"); err != nil || string(b) != "12345" {
		t.Fatalf("after move: %q, %v", b, err)
	}
	// A symlink out of the root: described by Stat, but nothing goes through it.
	if _, err := sb.Run(ctx, "ln -s / m/out"); err != nil {
		t.Fatal(err)
	}
	if st, err := f.Stat(ctx, "m/out"); err != nil || st.Type != FileTypeSymlink || st.SymlinkTarget != "/" {
		t.Fatalf("Stat of the link = %+v, %v", st, err)
	}
	escapes := []struct {
		name string
		err  error
	}{
		{"stat", func() error { _, e := f.Stat(ctx, "m/out/etc/passwd"); return e }()},
		{"mkdir", func() error { _, e := f.Mkdir(ctx, "m/out/tmp/x", true); return e }()},
		{"move out", f.Move(ctx, "m/g.txt", "m/out/tmp/g.txt", false)},
		{"move in", f.Move(ctx, "m/out/etc/hostname", "m/h", false)},
		{"watch", func() error { _, e := f.Watch(ctx, "m/out", WatchOptions{}); return e }()},
	}
	for _, tt := range escapes {
		if !errors.Is(tt.err, ErrForbidden) {
			t.Errorf("%s through the link: %v, want ErrForbidden", tt.name, tt.err)
		}
	}
	if err := f.Delete(ctx, "m", true); err != nil {
		t.Fatal(err)
	}
}

// fsopsStatFollow: Stat with FollowSymlinks describes what a link leads to, confined to
// the root; without it the link itself.
func fsopsStatFollow(t *testing.T, sb *Sandbox) {
	ctx, f := testCtx(t), sb.Files()
	if err := f.WriteFile(ctx, "sf/f.txt", []byte("12345"), WithMode(0o640)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Mkdir(ctx, "sf/d", true); err != nil {
		t.Fatal(err)
	}
	r, err := sb.Run(ctx, "cd sf && ln -s f.txt l && ln -s d ld && ln -s ../sf/l chain && ln -s nope dangling && "+
		"ln -s /etc abs && ln -s ../.. up && ln -s loop2 loop1 && ln -s loop1 loop2")
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("making the links: %+v, %v", r, err)
	}
	followed := []struct {
		path string
		typ  FileType
		size int64
	}{
		{"sf/l", FileTypeFile, 5},
		{"sf/chain", FileTypeFile, 5},
		{"sf/ld", FileTypeDirectory, -1},
		{"sf/f.txt", FileTypeFile, 5},
	}
	for _, tt := range followed {
		st, err := f.Stat(ctx, tt.path, FollowSymlinks())
		if err != nil || st.Type != tt.typ || st.Path != "/"+tt.path || st.SymlinkTarget != "" ||
			(tt.size >= 0 && st.Size != tt.size) {
			t.Errorf("Stat(%s, FollowSymlinks) = %+v, %v", tt.path, st, err)
		}
	}
	if st, err := f.Stat(ctx, "sf/l", FollowSymlinks()); err != nil || st.Mode != "0640" || st.Name != "l" {
		t.Errorf("Stat(sf/l, FollowSymlinks) mode and name = %+v, %v", st, err)
	}
	refused := []struct {
		path string
		want error
	}{
		{"sf/dangling", ErrNotFound},
		{"sf/abs", ErrForbidden},
		{"sf/up", ErrForbidden},
		{"sf/loop1", ErrForbidden}, // ELOOP: sandboxd's 403, as every escape
	}
	for _, tt := range refused {
		if _, err := f.Stat(ctx, tt.path, FollowSymlinks()); !errors.Is(err, tt.want) {
			t.Errorf("Stat(%s, FollowSymlinks) = %v, want %v", tt.path, err, tt.want)
		}
		if st, err := f.Stat(ctx, tt.path); err != nil || st.Type != FileTypeSymlink {
			t.Errorf("Stat(%s) = %+v, %v; want the link itself", tt.path, st, err)
		}
	}
	if st, err := f.Stat(ctx, "sf/l"); err != nil || st.Type != FileTypeSymlink || st.SymlinkTarget != "f.txt" {
		t.Errorf("Stat(sf/l) = %+v, %v; want the link itself", st, err)
	}
	if err := f.Delete(ctx, "sf", true); err != nil {
		t.Fatal(err)
	}
}

func fsopsBatchRanges(t *testing.T, sb *Sandbox) {
	ctx, f := testCtx(t), sb.Files()
	res, err := f.WriteMany(ctx, []BatchFile{{Path: "b/one", Data: []byte{0, 1}}, {Path: "b/deep/two", Data: []byte("two"), Mode: 0o600}, {Path: "b", Data: nil}})
	if err != nil || len(res) != 3 {
		t.Fatalf("WriteMany = %+v, %v", res, err)
	}
	if !res[0].OK || res[0].Size != 2 || !res[1].OK || res[2].OK || !errors.Is(res[2].Err(), ErrInvalidArgument) {
		t.Fatalf("WriteMany results %+v", res)
	}
	if st, _ := f.Stat(ctx, "b/deep/two"); st == nil || st.Mode != "0600" {
		t.Fatalf("mode of b/deep/two: %+v", st)
	}
	data := bytes.Repeat([]byte("0123456789"), 100)
	if err := f.WriteFile(ctx, "b/r", data); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		off, max  int64
		want      []byte
		truncated bool
	}{
		{0, 10, data[:10], true},
		{995, 100, data[995:], false},
		{10, -1, data[10:], false},
		{1000, 5, nil, false},
	}
	for _, tt := range tests {
		r, err := f.ReadRange(ctx, "b/r", tt.off, tt.max)
		if err != nil || !bytes.Equal(r.Data, tt.want) || r.Truncated != tt.truncated {
			t.Errorf("ReadRange(%d, %d) = %+v, %v", tt.off, tt.max, r, err)
		}
	}
}

func fsopsWatch(t *testing.T, sb *Sandbox) {
	ctx, f := testCtx(t), sb.Files()
	if _, err := f.Mkdir(ctx, "w", true); err != nil {
		t.Fatal(err)
	}
	w, err := f.Watch(ctx, "w", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := sb.Run(ctx, "cd w && for i in $(seq 100 399); do : > f$i; done && mv f100 moved"); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 400; i++ {
		ev, err := w.Next()
		if err != nil || ev.Type != FileCreated || ev.Path != fmt.Sprintf("f%d", i) {
			t.Fatalf("event %d = %+v, %v", i, ev, err)
		}
	}
	if ev, err := w.Next(); err != nil || ev.Type != FileMoved || ev.From != "f100" || ev.To != "moved" {
		t.Fatalf("move event = %+v, %v", ev, err)
	}
	w.Close()
	if _, err := w.Next(); err != io.EOF {
		t.Fatalf("Next after Close = %v, want io.EOF", err)
	}
	if _, err := f.Watch(ctx, "w/none", WatchOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("watch of a missing directory = %v", err)
	}
	if _, err := f.Watch(ctx, "w/moved", WatchOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("watch of a file = %v", err)
	}
}

// TestLocalDeleteRoot: only an explicit "/" with recursive names the root for Delete
// (it empties the workspace); "", "." and other spellings of the root are ErrInvalidPath
// before any request.
func TestLocalDeleteRoot(t *testing.T) {
	sb := localSandbox(t, ModeDirect)
	ctx, f := testCtx(t), sb.Files()
	if err := f.WriteFile(ctx, "keep.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path      string
		recursive bool
	}{{"", true}, {".", true}, {"/.", true}, {"//", true}, {"./", true}, {"", false}, {"/", false}}
	for _, tc := range tests {
		if err := f.Delete(ctx, tc.path, tc.recursive); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Delete(%q, %v) = %v, want ErrInvalidPath", tc.path, tc.recursive, err)
		}
		if ok, err := f.Exists(ctx, "keep.txt"); err != nil || !ok {
			t.Fatalf("after Delete(%q, %v): keep.txt exists %v, %v", tc.path, tc.recursive, ok, err)
		}
	}
	if err := f.Delete(ctx, "/", true); err != nil {
		t.Fatalf("Delete(\"/\", true) = %v", err)
	}
	if l, err := f.List(ctx, "/"); err != nil || len(l) != 0 {
		t.Errorf("root after Delete(\"/\", true): %+v, %v", l, err)
	}
}

// TestWatchNextEnds: Next ends with io.EOF after Close and with the context's error
// when the context given to Watch ends.
func TestWatchNextEnds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"ready"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	tests := []struct {
		name string
		end  func(w *Watcher, cancel context.CancelFunc)
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"Close", func(w *Watcher, _ context.CancelFunc) { _ = w.Close() },
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, io.EOF},
		{"cancelled", func(_ *Watcher, cancel context.CancelFunc) { cancel() },
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			context.Canceled},
		{"deadline", func(*Watcher, context.CancelFunc) {},
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 100*time.Millisecond)
			}, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			w, err := sb.Files().Watch(ctx, "d", WatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			tc.end(w, cancel)
			if _, err := w.Next(); err != tc.want {
				t.Errorf("Next = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestListPages: a directory larger than one of sandboxd's listing pages is read page
// by page, each request carrying the token of the page before, until a page without
// one. A token that comes again (at once, or after others: a,b,a) is an error instead of
// a loop, and pages that never end stop at maxListEntries entries (ErrTooLarge), an
// empty page counting as one.
func TestListPages(t *testing.T) {
	pages := map[string]string{
		"":   `{"path":"/d","entries":[{"name":"a","type":"file"},{"name":"b","type":"file"}],"continue":"62"}`,
		"62": `{"path":"/d","entries":[{"name":"c","type":"directory"}],"continue":"63"}`,
		"63": `{"path":"/d","entries":[{"name":"d","type":"file"}]}`,
	}
	var mu sync.Mutex
	var asked []string
	var n atomic.Int64 // requests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Query().Get("continue")
		mu.Lock()
		asked = append(asked, tok)
		mu.Unlock()
		i := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/files/d":
			_, _ = io.WriteString(w, pages[tok])
		case "/v1/files/loop": // the same token again at once
			_, _ = io.WriteString(w, `{"entries":[{"name":"x","type":"file"}],"continue":"loop"}`)
		case "/v1/files/cycle": // a, b, a, b, ...
			_, _ = fmt.Fprintf(w, `{"entries":[{"name":"x%d","type":"file"}],"continue":%q}`, i, []string{"b", "a"}[i%2])
		case "/v1/files/endless": // a new token each time, 10 names a page
			var e []string
			for j := 0; j < 10; j++ {
				e = append(e, fmt.Sprintf(`{"name":"f%d-%d","type":"file"}`, i, j))
			}
			_, _ = fmt.Fprintf(w, `{"entries":[%s],"continue":"t%d"}`, strings.Join(e, ","), i)
		case "/v1/files/empty": // a new token each time, no names
			_, _ = fmt.Fprintf(w, `{"entries":[],"continue":"t%d"}`, i)
		}
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	old := maxListEntries
	maxListEntries = 1000
	defer func() { maxListEntries = old }()
	tests := []struct {
		path  string
		names string
		asked string
		err   error  // a sentinel the error matches
		msg   string // in the error
		reqs  int64  // requests at most
	}{
		{path: "d", names: "a,b,c,d", asked: ",62,63", reqs: 3},
		{path: "loop", asked: ",loop", msg: `continue token "loop" came again`, reqs: 2},
		{path: "cycle", asked: ",a,b", msg: `continue token "a" came again`, reqs: 3},
		{path: "endless", err: ErrTooLarge, msg: "over 1000 entries", reqs: 101},
		{path: "empty", err: ErrTooLarge, msg: "over 1000 entries", reqs: 1001},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			n.Store(0)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := sb.Files().List(ctx, tc.path)
			if got := n.Load(); got > tc.reqs {
				t.Errorf("List(%s) sent %d requests, want at most %d", tc.path, got, tc.reqs)
			}
			if tc.msg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.msg) || (tc.err != nil && !errors.Is(err, tc.err)) {
					t.Fatalf("List(%s) = %d entries, %v; want an error with %q matching %v", tc.path, len(l), err, tc.msg, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range l {
				names = append(names, e.Name)
			}
			if got := strings.Join(names, ","); got != tc.names {
				t.Errorf("List(%s) = %s, want %s", tc.path, got, tc.names)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Join(asked, ","); tc.asked != "" && got != tc.asked {
				t.Errorf("List(%s) asked %s, want %s", tc.path, got, tc.asked)
			}
		})
	}
}

// TestWatcherNextAfterTooLarge: a Next after the ErrTooLarge of an event line over the
// limit returns the event after that line (not the line's tail as a bad event).
func TestWatcherNextAfterTooLarge(t *testing.T) {
	body := `{"type":"create","path":"a"}` + "\n" + `{"type":"create","path":"` +
		strings.Repeat("b", 17<<16+100) + `"}` + "\n" + `{"type":"delete","path":"c"}` + "\n"
	w := &Watcher{br: newNDJSONReader(strings.NewReader(body), maxEventLine)}
	var got []string
	for i := 0; i < 10; i++ {
		ev, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		switch {
		case errors.Is(err, ErrTooLarge):
			got = append(got, "ErrTooLarge")
		case err != nil:
			got = append(got, "error: "+err.Error())
		default:
			got = append(got, string(ev.Type)+" "+ev.Path)
		}
	}
	if g, want := strings.Join(got, ","), "create a,ErrTooLarge,delete c"; g != want {
		t.Fatalf("Next gave %.200s, want %s", g, want)
	}
}

func TestNamesDir(t *testing.T) {
	tests := []struct {
		in                string
		namesDir, dirOnly bool
		contentErr        bool
	}{
		{"f.txt", false, false, false},
		{"a/f.txt", false, false, false},
		{"f.txt/", true, true, true},
		{"a/b/.", true, true, true},
		{"a//", true, true, true},
		{"a/.b", false, false, false},
		{"a/b.", false, false, false},
		{"/", true, false, true},
		{"/.", true, false, true},
		{"", false, false, true},
	}
	for _, tt := range tests {
		if got := namesDir(tt.in); got != tt.namesDir {
			t.Errorf("namesDir(%q) = %v, want %v", tt.in, got, tt.namesDir)
		}
		if got := dirOnly(tt.in); got != tt.dirOnly {
			t.Errorf("dirOnly(%q) = %v, want %v", tt.in, got, tt.dirOnly)
		}
		if _, err := fileContentPath(tt.in); (err != nil) != tt.contentErr || (err != nil && !errors.Is(err, ErrInvalidPath)) {
			t.Errorf("fileContentPath(%q) = %v, want error %v", tt.in, err, tt.contentErr)
		}
	}
}

// TestLocalTrailingSlash: sandboxd drops a trailing slash, so "f.txt/" would be f.txt.
// A path that ends with "/" names a directory: content is never read or written through
// it, and Stat, Exists, Delete and Move find only a directory (a link to one included).
func TestLocalTrailingSlash(t *testing.T) {
	sb := localSandbox(t, ModeDirect)
	ctx, f := testCtx(t), sb.Files()
	if err := f.WriteFile(ctx, "ts/f.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Mkdir(ctx, "ts/d", true); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile(ctx, "ts/d/in.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	content := []struct {
		name string
		err  error
	}{
		{"Read", func() error { _, e := f.Read(ctx, "ts/f.txt/"); return e }()},
		{"ReadFile", func() error { _, e := f.ReadFile(ctx, "ts/f.txt/"); return e }()},
		{"ReadRange", func() error { _, e := f.ReadRange(ctx, "ts/f.txt/", 0, 4); return e }()},
		{"WriteFile", f.WriteFile(ctx, "ts/f.txt/", []byte("over"))},
		{"WriteFile new", f.WriteFile(ctx, "ts/new.txt/.", []byte("new"))},
		{"Create", func() error { _, e := f.Create(ctx, "ts/f.txt/"); return e }()},
		{"WriteMany", func() error {
			_, e := f.WriteMany(ctx, []BatchFile{{Path: "ts/ok.txt", Data: []byte("a")}, {Path: "ts/f.txt/", Data: []byte("b")}})
			return e
		}()},
	}
	for _, tc := range content {
		if !errors.Is(tc.err, ErrInvalidPath) {
			t.Errorf("%s: %v, want ErrInvalidPath", tc.name, tc.err)
		}
	}
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"Stat file/", func() error { _, e := f.Stat(ctx, "ts/f.txt/"); return e }(), ErrNotFound},
		{"Delete file/", f.Delete(ctx, "ts/f.txt/", false), ErrNotFound},
		{"Move file/", f.Move(ctx, "ts/f.txt/", "ts/g.txt", false), ErrNotFound},
		{"Move file to dir form", f.Move(ctx, "ts/f.txt", "ts/g/", false), ErrNotFound},
	}
	for _, tc := range checks {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if ok, err := f.Exists(ctx, "ts/f.txt/"); err != nil || ok {
		t.Errorf("Exists(f.txt/) = %v, %v; want false", ok, err)
	}
	if b, err := f.ReadFile(ctx, "ts/f.txt"); err != nil || string(b) != "data" {
		t.Fatalf("f.txt after the refused calls: %q, %v", b, err)
	}
	for _, p := range []string{"ts/new.txt", "ts/ok.txt", "ts/g.txt", "ts/g"} {
		if ok, err := f.Exists(ctx, p); err != nil || ok {
			t.Errorf("%s exists %v, %v after a refused call", p, ok, err)
		}
	}
	if st, err := f.Stat(ctx, "ts/d/"); err != nil || !st.IsDir() {
		t.Fatalf("Stat(d/) = %+v, %v", st, err)
	}
	if err := f.Move(ctx, "ts/d/", "ts/e/", false); err != nil {
		t.Fatalf("Move(d/, e/) = %v", err)
	}
	if err := f.Delete(ctx, "ts/e/", true); err != nil {
		t.Fatalf("Delete(e/) = %v", err)
	}
	if ok, err := f.Exists(ctx, "ts/e"); err != nil || ok {
		t.Errorf("e after Delete(e/): exists %v, %v", ok, err)
	}
}
