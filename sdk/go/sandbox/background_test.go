package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestBackgroundRequest(t *testing.T) {
	tests := []struct {
		name string
		cmd  Cmd
		opts []BackgroundOption
		want map[string]any
		err  error
	}{
		{"shell", Cmd{Command: "sleep 1"}, nil, map[string]any{"command": "sleep 1", "background": true}, nil},
		{"argv with env and dir", Cmd{Args: []string{"a", "b"}, Env: map[string]string{"K": "v"}, Dir: "w"}, nil,
			map[string]any{"command": []any{"a", "b"}, "env": map[string]any{"K": "v"}, "cwd": "w",
				"background": true}, nil},
		{"inline stdin", Cmd{Command: "cat", Stdin: strings.NewReader("hi")}, nil,
			map[string]any{"command": "cat", "stdin_b64": "aGk=", "background": true}, nil},
		{"open stdin", Cmd{Command: "cat"}, []BackgroundOption{KeepStdinOpen()},
			map[string]any{"command": "cat", "background": true, "stdin_open": true}, nil},
		{"timeout and pty", Cmd{Command: "top", Timeout: 2 * time.Second, PTY: &PTYSize{80, 24}}, nil,
			map[string]any{"command": "top", "timeout_seconds": 2.0, "pty": map[string]any{"cols": 80.0, "rows": 24.0},
				"background": true}, nil},
		{"no command", Cmd{}, nil, nil, ErrInvalidArgument},
		{"stdin too large", Cmd{Command: "cat", Stdin: bytes.NewReader(make([]byte, maxInlineStdin+1))}, nil, nil,
			ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.cmd.backgroundRequest(context.Background(), tc.opts)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("body = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseOutput(t *testing.T) {
	tests := []struct {
		line string
		want *OutputEvent
		bad  bool
	}{
		{`{"type":"stdout","offset":3,"data":"aGkK"}`, &OutputEvent{Type: "stdout", Offset: 3, Data: []byte("hi\n")}, false},
		{`{"type":"stderr","offset":0,"data":""}`, &OutputEvent{Type: "stderr", Data: []byte{}}, false},
		{`{"type":"dropped","offset":0,"bytes":42}`, &OutputEvent{Type: "dropped", Dropped: 42}, false},
		{`{"type":"exit","exit_code":3,"signal":0,"timed_out":false,"offset":9}`,
			&OutputEvent{Type: "exit", Offset: 9, Exit: &ExitStatus{ExitCode: 3}}, false},
		{`{"type":"exit","exit_code":null,"signal":9,"offset":1}`,
			&OutputEvent{Type: "exit", Offset: 1, Exit: &ExitStatus{ExitCode: -1, Signal: 9}}, false},
		{`{"type":"later"}`, nil, false},
		{`{"type":"stdout","data":"!!"}`, nil, true},
		{`not json`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseOutput([]byte(tc.line))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad = %v", err, tc.bad)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v (exit %+v), want %+v (exit %+v)", got, exitOf(got), tc.want, exitOf(tc.want))
			}
		})
	}
}

func exitOf(ev *OutputEvent) any {
	if ev == nil || ev.Exit == nil {
		return nil
	}
	return *ev.Exit
}

func TestBackgroundErrors(t *testing.T) {
	tests := []struct {
		err  error
		want []error
		not  []error
	}{
		{&HTTPError{StatusCode: http.StatusConflict, Code: "FAILED_PRECONDITION"}, []error{ErrProcessExited, ErrConflict},
			[]error{ErrTooManyProcesses}},
		{&HTTPError{StatusCode: http.StatusTooManyRequests, Code: "RESOURCE_EXHAUSTED"},
			[]error{ErrTooManyProcesses, ErrUnavailable}, []error{ErrProcessExited}},
		{&HTTPError{StatusCode: http.StatusTooManyRequests, Code: "ROUTER"}, []error{ErrUnavailable},
			[]error{ErrTooManyProcesses}},
		{&HTTPError{StatusCode: http.StatusNotFound, Code: "NOT_FOUND"}, []error{ErrNotFound},
			[]error{ErrProcessExited}},
		{io.EOF, []error{io.EOF}, []error{ErrProcessExited}},
	}
	for _, tc := range tests {
		got := bgError(tc.err)
		for _, w := range tc.want {
			if !errors.Is(got, w) {
				t.Errorf("%v: not %v", got, w)
			}
		}
		for _, n := range tc.not {
			if errors.Is(got, n) {
				t.Errorf("%v: is %v", got, n)
			}
		}
	}
}

func TestOutputStreamNext(t *testing.T) {
	body := "{\"type\":\"dropped\",\"offset\":0,\"bytes\":5}\n\n{\"type\":\"future\"}\n" +
		"{\"type\":\"stdout\",\"offset\":5,\"data\":\"eA==\"}\n{\"type\":\"exit\",\"exit_code\":0,\"offset\":6}"
	o := &OutputStream{ctx: context.Background(), body: io.NopCloser(strings.NewReader(body))}
	o.br = newNDJSONReader(o.body, maxEventLine)
	var types []string
	for {
		ev, err := o.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "dropped,stdout,exit" {
		t.Fatalf("events %v", types)
	}
	big := `{"type":"stdout","data":"` + strings.Repeat("A", maxEventLine+8) + `"}` + "\n"
	o = &OutputStream{ctx: context.Background(), body: io.NopCloser(strings.NewReader(big))}
	o.br = newNDJSONReader(o.body, maxEventLine)
	if _, err := o.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized line: %v", err)
	}
}

// TestOutputStreamNextAfterTooLarge: a Next after the ErrTooLarge of an event line over
// the limit returns the event after that line (not the line's tail as a bad event, nor
// more errors), wherever the limit was passed in the line.
func TestOutputStreamNextAfterTooLarge(t *testing.T) {
	tests := []struct {
		name string
		data int // base64 characters of the long event
	}{
		{"newline read with the error", maxEventLine + 8},
		{"short rest after the error", 17<<16 + 100}, // the limit is passed 17 reads in
		{"rest of several reads", 3 * maxEventLine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"type":"stdout","offset":0,"data":"aGk="}` + "\n" +
				`{"type":"stdout","offset":2,"data":"` + strings.Repeat("A", tc.data) + `"}` + "\n" +
				`{"type":"stderr","offset":9,"data":"eA=="}` + "\n" +
				`{"type":"exit","exit_code":0,"offset":10}` + "\n"
			o := &OutputStream{ctx: context.Background(), body: io.NopCloser(strings.NewReader(body))}
			o.br = newNDJSONReader(o.body, maxEventLine)
			var got []string
			for i := 0; i < 10; i++ {
				ev, err := o.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				switch {
				case errors.Is(err, ErrTooLarge):
					got = append(got, "ErrTooLarge")
				case err != nil:
					got = append(got, "error: "+err.Error())
				default:
					got = append(got, fmt.Sprintf("%s@%d", ev.Type, ev.Offset))
				}
			}
			want := "stdout@0,ErrTooLarge,stderr@9,exit@10"
			if g := strings.Join(got, ","); g != want {
				t.Fatalf("Next gave %.200s, want %s", g, want)
			}
		})
	}
}

// Next after a reopen that failed (body nil) tries again instead of closing a nil body.
func TestOutputStreamNextAfterFailedReopen(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := &OutputStream{ctx: ctx, follow: true}
	if _, err := o.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
}

// TestOutputStreamCloseFromAnotherGoroutine: Close ends a Next that waits in follow mode
// (io.EOF), and no request follows.
func TestOutputStreamCloseFromAnotherGoroutine(t *testing.T) {
	var outputs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/processes/7/output" {
			http.NotFound(w, r)
			return
		}
		outputs.Add(1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"stdout","offset":0,"data":"aGkK"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name       string
		closeFirst bool // Close before the second Next
	}{{"Close while Next waits", false}, {"Close before Next", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outputs.Store(0)
			o, err := handleFor(t, srv).Background(7).Output(ctx, true, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ev, err := o.Next(); err != nil || string(ev.Data) != "hi\n" {
				t.Fatalf("first Next: %+v, %v", ev, err)
			}
			if tc.closeFirst {
				_ = o.Close()
			}
			next := make(chan error, 1)
			go func() { _, err := o.Next(); next <- err }()
			if !tc.closeFirst {
				time.Sleep(50 * time.Millisecond) // Next is waiting for the next line
				_ = o.Close()
			}
			select {
			case err := <-next:
				if !errors.Is(err, io.EOF) {
					t.Errorf("Next after Close: %v, want io.EOF", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Next still waits 5 s after Close")
			}
			if n := outputs.Load(); n != 1 {
				t.Errorf("%d output requests, want 1", n)
			}
		})
	}
}

// TestBackgroundWaitBacksOff: a server that answers a wait "running" at once (it does not
// hold it for the slice asked) is asked again after a pause that grows (50 ms doubling to
// 1 s), not in a tight loop; the wait still ends at its timeout or at the context's end.
func TestBackgroundWaitBacksOff(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":1,"pid":2,"state":"running","background":true}`)
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	tests := []struct {
		name    string
		ctx     time.Duration
		timeout time.Duration
		err     error
	}{
		{"context ends", 1500 * time.Millisecond, 0, context.DeadlineExceeded},
		{"timeout passes", 10 * time.Second, 1500 * time.Millisecond, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n.Store(0)
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			start := time.Now()
			info, err := sb.Background(1).Wait(ctx, tc.timeout)
			took := time.Since(start)
			if !errors.Is(err, tc.err) || (err == nil && !info.Running()) {
				t.Fatalf("Wait = %+v, %v; want err %v", info, err, tc.err)
			}
			// 50+100+200+400+800 ms of pauses fill 1.5 s: about 6 requests (a tight loop
			// sent thousands)
			if got := n.Load(); got > 20 {
				t.Errorf("Wait sent %d requests in %v, want at most 20", got, took)
			}
			if took > 5*time.Second {
				t.Errorf("Wait took %v, want about 1.5 s", took)
			}
		})
	}
}
