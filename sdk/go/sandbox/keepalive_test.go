package sandbox

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProcessStreamIgnoresUnknownEvents: events of a type the SDK does not know (the
// keepalive sandboxd sends on long silences) are skipped, before the start event too.
func TestProcessStreamIgnoresUnknownEvents(t *testing.T) {
	const (
		start     = `{"type":"start","id":5,"pid":9}` + "\n"
		out       = `{"type":"stdout","data":"aGk="}` + "\n" // "hi"
		exit      = `{"type":"exit","exit_code":3}` + "\n"
		keepalive = `{"type":"keepalive"}` + "\n"
	)
	tests := []struct {
		name   string
		stream string
	}{
		{name: "keepalive between events", stream: start + keepalive + out + keepalive + keepalive + exit},
		{name: "keepalive before start", stream: keepalive + start + out + exit},
		{name: "newer type with fields", stream: start + `{"type":"progress","pct":50,"data":"x"}` + "\n" + out + exit},
		{name: "blank lines", stream: start + "\n  \n" + out + exit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				_, _ = io.WriteString(w, tc.stream)
			}))
			defer srv.Close()
			sb := handleFor(t, srv)
			var stdout bytes.Buffer
			p, err := sb.Start(testCtx(t), Cmd{Command: "x", Stdout: &stdout})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			st, err := p.Wait()
			if err != nil || st.ExitCode != 3 || stdout.String() != "hi" || p.ID != 5 || p.PID != 9 {
				t.Errorf("Wait: %+v, %v; stdout %q, id %d pid %d", st, err, stdout.String(), p.ID, p.PID)
			}
		})
	}
}

// TestRunLeadingWhitespace: the answer of /v1/processes/run may be preceded by
// whitespace (sandboxd's keepalives on long runs).
func TestRunLeadingWhitespace(t *testing.T) {
	const body = `{"id":4,"exit_code":0,"stdout":"aGk=","stderr":"","duration_ms":12}`
	tests := []struct {
		name   string
		prefix string
	}{
		{name: "none"},
		{name: "spaces", prefix: strings.Repeat(" ", 5000)},
		{name: "newlines and tabs", prefix: " \n\t \r\n "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/processes/run" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.prefix)
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			sb := handleFor(t, srv)
			r, err := sb.Run(testCtx(t), "echo hi")
			if err != nil || r.Stdout != "hi" || r.ID != 4 || r.ExitCode != 0 {
				t.Errorf("Run: %+v, %v", r, err)
			}
		})
	}
}
