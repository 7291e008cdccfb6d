package sandbox

import (
	"fmt"
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
