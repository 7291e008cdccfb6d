package sandbox

import (
	"os"
	"strings"
	"sync"
	"time"
)

// tokenRecheck is how often a token file is looked at again (a stat; the file is read
// again only when it changed).
var tokenRecheck = time.Second

// tokenFile is a bearer token kept in a file that is replaced while the client runs
// (projected service-account tokens rotate about hourly). It is safe for concurrent
// use; a nil *tokenFile has no token.
type tokenFile struct {
	path string

	mu      sync.Mutex
	tok     string      // the last non-empty content read, trimmed
	info    os.FileInfo // the file as it was when tok was read
	checked time.Time   // the last look at the file
}

// newTokenFile returns the token kept in path (nil for "").
func newTokenFile(path string) *tokenFile {
	if path == "" {
		return nil
	}
	f := &tokenFile{path: path}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reload(true)
	return f
}

// token returns the file's current token, or fallback when there is no file or it has
// never been readable. The file is looked at at most once per tokenRecheck.
func (f *tokenFile) token(fallback string) string {
	if f == nil {
		return fallback
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= tokenRecheck {
		f.reload(false)
	}
	if f.tok == "" {
		return fallback
	}
	return f.tok
}

// renew reads the file now (the token in use was rejected) and reports whether the
// token changed.
func (f *tokenFile) renew() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reload(true)
}

// reload reads the file when it changed since the last read (always with force) and
// reports whether the token changed. A missing, unreadable or empty file keeps the
// last token. A file changed in the last second is read again at the next look: a
// coarse file system clock could give a second change the same time stamp. f.mu is
// held.
func (f *tokenFile) reload(force bool) bool {
	f.checked = time.Now()
	fi, err := os.Stat(f.path)
	if err != nil || (!force && sameFile(fi, f.info)) {
		return false
	}
	b, err := os.ReadFile(f.path)
	tok := strings.TrimSpace(string(b))
	if err != nil || tok == "" {
		return false
	}
	old := f.tok
	f.tok, f.info = tok, fi
	if time.Since(fi.ModTime()) < time.Second {
		f.info = nil
	}
	return tok != old
}

// sameFile: a and b are the same unchanged file (a rotation replaces the file or
// rewrites it, which changes its identity, size or modification time).
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
