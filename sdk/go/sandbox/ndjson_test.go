package sandbox

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestNDJSONReaderLine(t *testing.T) {
	long := strings.Repeat("x", 70<<10) // over bufio's buffer: read in pieces
	tests := []struct {
		name  string
		body  string
		max   int
		lines []string
		err   error // after the lines
	}{
		{"lines", "{\"a\":1}\n{\"b\":2}\n", 100, []string{`{"a":1}`, `{"b":2}`}, io.EOF},
		{"blank kept", "\n{}\n", 100, []string{"", "{}"}, io.EOF},
		{"crlf", "{}\r\n", 100, []string{"{}"}, io.EOF},
		{"no final newline", "{}", 100, []string{"{}"}, io.EOF},
		{"empty", "", 100, nil, io.EOF},
		{"at the limit", "12345\n", 5, []string{"12345"}, io.EOF},
		{"over the limit", "123456\n", 5, nil, ErrTooLarge},
		{"long line in pieces", long + "\n", 80 << 10, []string{long}, io.EOF},
		{"long line over", long + "\n", 64 << 10, nil, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newNDJSONReader(strings.NewReader(tt.body), tt.max)
			for i, want := range tt.lines {
				got, err := r.line()
				if err != nil || string(got) != want {
					t.Fatalf("line %d = %.40q, %v; want %.40q", i, got, err, want)
				}
			}
			if _, err := r.line(); !errors.Is(err, tt.err) {
				t.Fatalf("after the lines: %v, want %v", err, tt.err)
			}
		})
	}
}

// failAfter is a reader whose data ends in err instead of io.EOF.
type failAfter struct {
	r   io.Reader
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = f.err
	}
	return n, err
}

// A read that fails inside a line returns the failure, not the partial line as a line.
func TestNDJSONReaderCut(t *testing.T) {
	r := newNDJSONReader(&failAfter{strings.NewReader("{}\n{\"type\":\"std"), io.ErrUnexpectedEOF}, 100)
	if got, err := r.line(); err != nil || string(got) != "{}" {
		t.Fatalf("first line = %q, %v", got, err)
	}
	if got, err := r.line(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the cut line = %q, %v; want io.ErrUnexpectedEOF", got, err)
	}
}

func TestNDJSONReaderDecode(t *testing.T) {
	type ev struct {
		Type string `json:"type"`
		N    int    `json:"n"`
	}
	tests := []struct {
		name string
		body string
		want []ev
		err  string // of the read after want; "" for io.EOF
	}{
		{"events", "{\"type\":\"a\",\"n\":1}\n{\"type\":\"b\"}\n", []ev{{"a", 1}, {"b", 0}}, ""},
		{"blank lines skipped", "\n  \n{\"type\":\"a\"}\n\n", []ev{{"a", 0}}, ""},
		{"unknown fields ignored", "{\"type\":\"a\",\"x\":[1]}\n", []ev{{"a", 0}}, ""},
		{"bad json", "{\"type\":\"a\"}\n{nope}\n", []ev{{"a", 0}}, "bad event"},
		{"cut short", "{\"type\":", nil, "bad event"},
		{"too large", strings.Repeat(" ", 200) + "{}\n", nil, "event line over 100 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newNDJSONReader(strings.NewReader(tt.body), 100)
			for i, want := range tt.want {
				var got ev
				if err := r.decode(&got); err != nil || got != want {
					t.Fatalf("event %d = %+v, %v; want %+v", i, got, err, want)
				}
			}
			var v ev
			err := r.decode(&v)
			if tt.err == "" {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("after the events: %v, want io.EOF", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("after the events: %v, want %q", err, tt.err)
			}
		})
	}
}

func TestNDJSONReaderReadsTheRest(t *testing.T) {
	r := newNDJSONReader(strings.NewReader("{}\ntail"), 100)
	if _, err := r.line(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "tail" {
		t.Fatalf("rest = %q, %v", rest, err)
	}
}

// TestNDJSONReaderAfterTooLarge: after ErrTooLarge the reader goes on at the next line,
// whether the long line's newline was read with the error or not (the rest of the line
// is dropped, not returned as a line of its own nor as more errors).
func TestNDJSONReaderAfterTooLarge(t *testing.T) {
	type step struct {
		line string
		err  error // instead of line
	}
	ln := func(s string) step { return step{line: s} }
	tooLarge, eof := step{err: ErrTooLarge}, step{err: io.EOF}
	x := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name  string
		body  io.Reader
		max   int
		steps []step
	}{
		{"newline read with the error", strings.NewReader(x(200) + "\nok\n"), 100,
			[]step{tooLarge, ln("ok"), eof}},
		{"rest shorter than the limit", strings.NewReader(x(64<<10+50) + "\n{\"a\":1}\n"), 100,
			[]step{tooLarge, ln(`{"a":1}`), eof}},
		{"rest over several reads", strings.NewReader(x(300<<10) + "\nok\n"), 100,
			[]step{tooLarge, ln("ok"), eof}},
		{"rest ends in crlf", strings.NewReader(x(70<<10) + "\r\nok\r\n"), 100,
			[]step{tooLarge, ln("ok"), eof}},
		{"two long lines", strings.NewReader(x(70<<10) + "\n" + x(70<<10) + "\nok\n"), 100,
			[]step{tooLarge, tooLarge, ln("ok"), eof}},
		{"long line then one at the limit", strings.NewReader(x(70<<10) + "\n" + x(100) + "\n"), 100,
			[]step{tooLarge, ln(x(100)), eof}},
		{"long last line without newline", strings.NewReader("ok\n" + x(70<<10)), 100,
			[]step{ln("ok"), tooLarge, eof}},
		{"cut inside the rest", &failAfter{strings.NewReader(x(70 << 10)), io.ErrUnexpectedEOF}, 100,
			[]step{tooLarge, {err: io.ErrUnexpectedEOF}}},
		{"over the event limit", strings.NewReader(x(maxEventLine+(64<<10)+10) + "\nok\n"), maxEventLine,
			[]step{tooLarge, ln("ok"), eof}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newNDJSONReader(tt.body, tt.max)
			for i, want := range tt.steps {
				got, err := r.line()
				if want.err != nil {
					if !errors.Is(err, want.err) {
						t.Fatalf("step %d = %.40q, %v; want %v", i, got, err, want.err)
					}
					continue
				}
				if err != nil || string(got) != want.line {
					t.Fatalf("step %d = %.40q, %v; want %.40q", i, got, err, want.line)
				}
			}
		})
	}
}
