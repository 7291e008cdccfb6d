package sandbox

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// cleanPath checks a sandbox path and returns its segments. Paths are relative to
// sandboxd's root (a leading "/" is allowed and means the root); "." segments and
// repeated slashes are dropped; "..", NUL and control characters are refused (the server
// confines paths as well, this only gives an early, clear error). allowRoot permits the
// root itself (listing, recursive delete).
func cleanPath(p string, allowRoot bool) ([]string, error) {
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return nil, fmt.Errorf("%w: %q has a control character", ErrInvalidPath, p)
		}
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("%w: %q has a \"..\" segment", ErrInvalidPath, p)
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 && !allowRoot {
		if p == "" {
			return nil, fmt.Errorf("%w: empty path", ErrInvalidPath)
		}
		return nil, fmt.Errorf("%w: %q names the root", ErrInvalidPath, p)
	}
	return segs, nil
}

// filesPath is the escaped request path of p under /v1/files.
func filesPath(p string, allowRoot bool) (string, error) {
	segs, err := cleanPath(p, allowRoot)
	if err != nil {
		return "", err
	}
	if len(segs) == 0 {
		return "/v1/files", nil
	}
	var b strings.Builder
	b.WriteString("/v1/files")
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// namesDir reports whether p ends with "/" or "/." below the root: path resolution then
// takes it only to a directory (opening "f.txt/" fails with ENOTDIR). sandboxd drops a
// trailing slash like any empty segment, so the SDK keeps that meaning itself: a file's
// content is never read or written through such a path (fileContentPath), and Stat,
// Exists, Delete and Move find only a directory there (dirOnly).
func namesDir(p string) bool {
	return strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.")
}

// dirOnly is namesDir for a path other than the root.
func dirOnly(p string) bool {
	segs, err := cleanPath(p, true)
	return err == nil && len(segs) > 0 && namesDir(p)
}

// fileContentPath is filesPath of a file read or written: ErrInvalidPath when p names a
// directory by its form (namesDir), where sandboxd would use the file before the slash.
func fileContentPath(p string) (string, error) {
	u, err := filesPath(p, false)
	if err == nil && namesDir(p) {
		err = fmt.Errorf("%w: %q ends with \"/\": it names a directory, not a file", ErrInvalidPath, p)
	}
	return u, err
}

// notADirectory is the ErrNotFound of a path that ends with "/" and is no directory.
func notADirectory(op string) error {
	return &HTTPError{Op: op, StatusCode: http.StatusNotFound, Code: "NOT_FOUND",
		Message: "not a directory, and the path ends with \"/\""}
}
