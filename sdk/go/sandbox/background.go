package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of background processes (both also match the HTTPError's own sentinels).
var (
	// ErrProcessExited: stdin or a signal for a background process that has exited (409).
	ErrProcessExited = errors.New("sandbox: process has exited")
	// ErrTooManyProcesses: sandboxd's background table or process limit is full (429).
	ErrTooManyProcesses = errors.New("sandbox: too many processes")
)

// States of a background process.
const (
	StateRunning = "running"
	StateExited  = "exited"
)

// BackgroundInfo describes a background process, running or exited. ExitCode is nil
// while it runs and when a signal ended it (then Signal is set). OutputStart and
// OutputEnd are the logical byte offsets of the output sandboxd still holds.
type BackgroundInfo struct {
	ID          int        `json:"id"`
	PID         int        `json:"pid"`
	Command     []string   `json:"command"`
	State       string     `json:"state"`
	PTY         bool       `json:"pty"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at"`
	ExitCode    *int       `json:"exit_code"`
	Signal      *int       `json:"signal"`
	TimedOut    bool       `json:"timed_out"`
	OutputStart int64      `json:"output_start"`
	OutputEnd   int64      `json:"output_end"`
	Background  bool       `json:"background"`
}

// Running reports whether the process still runs.
func (i *BackgroundInfo) Running() bool { return i.State != StateExited }

// OutputEvent is one event of a background process's output: "stdout" or "stderr"
// (Data at logical byte Offset), "dropped" (Dropped bytes from Offset on are no longer
// held: the buffer overflowed) or "exit" (Exit set; Offset is the end of the output).
type OutputEvent struct {
	Type    string
	Offset  int64
	Data    []byte
	Dropped int64
	Exit    *ExitStatus
}

// BackgroundOption changes how StartBackground starts a process.
type BackgroundOption func(req map[string]any)

// KeepStdinOpen leaves the process's stdin open for WriteStdin (by default it is closed
// after cmd.Stdin, if any, was written).
func KeepStdinOpen() BackgroundOption {
	return func(req map[string]any) { req["stdin_open"] = true }
}

// BackgroundProcess is a handle on a background process by id: it holds no connection,
// and any client can make one (Sandbox.Background) after the one that started it is gone.
type BackgroundProcess struct {
	ID  int // sandboxd's process id
	PID int // the pid inside the sandbox (0 for a handle made by Background)
	s   *Sandbox
}

func (cmd *Cmd) backgroundRequest(ctx context.Context, opts []BackgroundOption) ([]byte, error) {
	stdin := cmd.Stdin
	c := *cmd
	c.Stdin, c.MaxOutputBytes = nil, 0
	req, err := c.request(ctx, false)
	if err != nil {
		return nil, err
	}
	if stdin != nil {
		b, err := readInlineStdin(ctx, stdin, "use KeepStdinOpen and WriteStdin")
		if err != nil {
			return nil, err
		}
		req["stdin_b64"] = base64.StdEncoding.EncodeToString(b)
	}
	req["background"] = true
	for _, o := range opts {
		o(req)
	}
	return json.Marshal(req)
}

// bgError adds ErrProcessExited / ErrTooManyProcesses to sandboxd's answers that mean them.
func bgError(err error) error {
	var he *HTTPError
	if !errors.As(err, &he) {
		return err
	}
	switch {
	case he.StatusCode == http.StatusConflict && he.Code == "FAILED_PRECONDITION":
		return fmt.Errorf("%w: %w", ErrProcessExited, err)
	case he.StatusCode == http.StatusTooManyRequests && he.Code == "RESOURCE_EXHAUSTED":
		return fmt.Errorf("%w: %w", ErrTooManyProcesses, err)
	}
	return err
}

func decodeInfo(op string, r io.Reader) (*BackgroundInfo, error) {
	var info BackgroundInfo
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("sandbox: %s: bad response: %w", op, err)
	}
	return &info, nil
}

// StartBackground starts cmd as a background process: it keeps running when this
// client, its context or its connection goes away, and its output is kept (bounded) for
// BackgroundProcess.Output. cmd.Stdin, when set, is read fully (at most 8 MiB) and
// written to stdin; Stdout, Stderr and MaxOutputBytes are ignored. Never retried (a
// retry could start it twice); ErrTooManyProcesses when the table is full.
func (s *Sandbox) StartBackground(ctx context.Context, cmd Cmd, opts ...BackgroundOption) (*BackgroundProcess,
	error) {
	body, err := cmd.backgroundRequest(ctx, opts)
	if err != nil {
		return nil, err
	}
	// Sent as a stream so that it is never retried nor replayed after a resume (it could
	// start twice), and chunked (a plain io.Reader: net/http would send a *bytes.Reader
	// with a Content-Length), as the other process requests (connection.go, chunkedBody).
	resp, _, err := s.send(ctx, call{op: "start background", method: http.MethodPost, path: "/v1/processes",
		stream: struct{ io.Reader }{bytes.NewReader(body)}, contentType: "application/json"})
	if err != nil {
		return nil, bgError(err)
	}
	defer resp.Body.Close()
	info, err := decodeInfo("start background", resp.Body)
	if err != nil {
		return nil, err
	}
	return &BackgroundProcess{ID: info.ID, PID: info.PID, s: s}, nil
}

// Background returns a handle on background process id (no request is made).
func (s *Sandbox) Background(id int) *BackgroundProcess { return &BackgroundProcess{ID: id, s: s} }

// BackgroundProcesses lists the background processes sandboxd holds, running and exited.
func (s *Sandbox) BackgroundProcesses(ctx context.Context) ([]BackgroundInfo, error) {
	resp, _, err := s.send(ctx, call{op: "list processes", method: http.MethodGet, path: "/v1/processes",
		idempotent: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Processes []BackgroundInfo `json:"processes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("sandbox: list processes: bad response: %w", err)
	}
	out := []BackgroundInfo{}
	for _, p := range r.Processes {
		if p.Background {
			out = append(out, p)
		}
	}
	return out, nil
}

func (p *BackgroundProcess) path(action string) string {
	if action == "" {
		return "/v1/processes/" + strconv.Itoa(p.ID)
	}
	return "/v1/processes/" + strconv.Itoa(p.ID) + "/" + action
}

func (p *BackgroundProcess) do(ctx context.Context, cl call) (*http.Response, error) {
	resp, _, err := p.s.send(ctx, cl)
	return resp, bgError(err)
}

// post sends action; idempotent ones (a kill: repeating it changes nothing) are retried
// as reads are, after a lost connection or a proxy's 502/503/504.
func (p *BackgroundProcess) post(ctx context.Context, op, action string, body []byte, ct string,
	idempotent bool) error {
	if body == nil {
		body = []byte{}
	}
	resp, err := p.do(ctx, call{op: op, method: http.MethodPost, path: p.path(action), body: body,
		contentType: ct, idempotent: idempotent})
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Info returns the process's current state (ErrNotFound once removed or evicted).
func (p *BackgroundProcess) Info(ctx context.Context) (*BackgroundInfo, error) {
	resp, err := p.do(ctx, call{op: "process info", method: http.MethodGet, path: p.path(""), idempotent: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return decodeInfo("process info", resp.Body)
}

// Bounds of long background calls: proxies (the router, the API server) cut requests that
// send no byte for a minute, so a long wait is a loop of short ones, and an output stream
// that ends before the exit is resumed from its offset.
const (
	waitSlice   = 25 * time.Second
	maxResumes  = 3               // quick ends in a row without a new event
	quickEnd    = 5 * time.Second // a response that lasted longer was cut by a timeout
	resumePause = 200 * time.Millisecond
	// a wait answered "running" in less than half its slice (a server or proxy that does
	// not hold it) is asked again after waitPollMin, doubling to waitPollMax
	waitPollMin = 50 * time.Millisecond
	waitPollMax = time.Second
)

// Wait waits until the process exits, timeout passes (timeout <= 0: no limit but ctx)
// or ctx ends, and returns its state (check Running after a timeout). Each request asks
// sandboxd to hold it up to 25 s; one answered "running" well before that (in less than
// half its time) is followed by a pause of 50 ms, doubling to 1 s, so that a server
// that does not hold the wait is not asked in a tight loop. Without a context deadline
// each request must be answered within its hold plus Options.DefaultTimeout: a wait
// without a timeout lasts until the exit, but not past a server that stopped answering.
func (p *BackgroundProcess) Wait(ctx context.Context, timeout time.Duration) (*BackgroundInfo, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	delay := time.Duration(0)
	for {
		slice := waitSlice
		if !deadline.IsZero() {
			slice = min(slice, max(0, time.Until(deadline)))
		}
		start := time.Now()
		info, err := p.waitOnce(ctx, slice)
		if err != nil || !info.Running() || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return info, err
		}
		if time.Since(start) >= slice/2 {
			delay = 0 // held: the server waits as asked
			continue
		}
		if delay = min(max(2*delay, waitPollMin), waitPollMax); !deadline.IsZero() {
			delay = min(delay, time.Until(deadline))
		}
		if pause(ctx, delay); ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

func (p *BackgroundProcess) waitOnce(ctx context.Context, slice time.Duration) (*BackgroundInfo, error) {
	q := url.Values{"timeout": {strconv.FormatFloat(slice.Seconds(), 'f', -1, 64)}}
	resp, err := p.do(ctx, call{op: "wait", method: http.MethodGet, path: p.path("wait"), query: q,
		idempotent: true, limit: limitRun, runTimeout: slice})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return decodeInfo("wait", resp.Body)
}

// WriteStdin sends data to stdin (a process started with KeepStdinOpen).
func (p *BackgroundProcess) WriteStdin(ctx context.Context, data []byte) error {
	return p.post(ctx, "stdin", "stdin", append([]byte{}, data...), "", false)
}

// CloseStdin closes stdin once the queued data is written.
func (p *BackgroundProcess) CloseStdin(ctx context.Context) error {
	// Sent once: on a PTY each close is a ^D, and a second one after a lost answer would
	// end the shell under the program that read the first.
	return p.post(ctx, "stdin close", "stdin/close", nil, "", false)
}

// Signal sends a signal to the process group: a name ("SIGTERM", "INT") or a number.
// ErrProcessExited once it exited.
func (p *BackgroundProcess) Signal(ctx context.Context, sig string) error {
	var v any = sig
	if n, err := strconv.Atoi(sig); err == nil {
		v = n
	}
	b, _ := json.Marshal(map[string]any{"signal": v})
	return p.post(ctx, "signal", "signal", b, "application/json", isKill(v))
}

// isKill: SIGKILL by name or number, the one signal whose repetition changes nothing.
func isKill(v any) bool {
	switch s := v.(type) {
	case int:
		return s == 9
	case string:
		u := strings.ToUpper(s)
		return u == "SIGKILL" || u == "KILL"
	}
	return false
}

// Kill sends SIGKILL to the process group; no error when it already exited (its entry
// stays listed: see Remove).
func (p *BackgroundProcess) Kill(ctx context.Context) error {
	if err := p.Signal(ctx, "SIGKILL"); err != nil && !errors.Is(err, ErrProcessExited) {
		return err
	}
	return nil
}

// Remove kills the process if it still runs, waits for it and forgets its entry and
// output. No error when it is already gone.
func (p *BackgroundProcess) Remove(ctx context.Context) error {
	info, err := p.Info(ctx)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.Running() {
		if err := p.Kill(ctx); err != nil {
			return err
		}
		if _, err := p.Wait(ctx, 0); err != nil {
			return err
		}
	}
	resp, err := p.do(ctx, call{op: "remove", method: http.MethodDelete, path: p.path(""), idempotent: true})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// OutputStream reads the output events of a background process; Close it when done
// (closing early leaves the process running). Next is for one goroutine at a time;
// Close may be called from another one to end a Next that waits (it then returns io.EOF).
type OutputStream struct {
	p      *BackgroundProcess
	ctx    context.Context
	cancel context.CancelFunc // ends ctx (Close); nil in tests that build a stream
	follow bool
	// Next's own state.
	offset  int64 // where the next request starts
	body    io.ReadCloser
	br      *ndjsonReader
	started time.Time
	idle    int  // quick ends in a row without a new event
	done    bool // the exit event was read, or the stream gave up
	// Shared with Close.
	closed atomic.Bool
	mu     sync.Mutex
	live   io.ReadCloser // the body open now, for Close
}

// Output replays the output sandboxd still holds from byte offset on (a "dropped" event
// first when part of it is gone), then, with follow, streams live output until the exit
// event; a response cut by a proxy's timeout, or silent for Options.StreamIdleTimeout
// (sandboxd sends keepalives: a dead connection), is resumed from where it stopped.
// Without follow the stream ends after the replay (with the exit event when the process
// has exited), or Next returns the *StreamIdleError of a silent one.
func (p *BackgroundProcess) Output(ctx context.Context, follow bool, offset int64) (*OutputStream, error) {
	if offset < 0 {
		return nil, fmt.Errorf("%w: offset %d", ErrInvalidArgument, offset)
	}
	o := &OutputStream{p: p, follow: follow, offset: offset}
	o.ctx, o.cancel = context.WithCancel(ctx)
	if err := o.open(); err != nil {
		o.cancel()
		return nil, err
	}
	return o, nil
}

func (o *OutputStream) open() error {
	q := url.Values{"follow": {strconv.FormatBool(o.follow)}, "offset": {strconv.FormatInt(o.offset, 10)}}
	o.started = time.Now()
	resp, err := o.p.do(o.ctx, call{op: "output", method: http.MethodGet, path: o.p.path("output"), query: q,
		idempotent: true, limit: limitHead})
	if err != nil {
		if o.closed.Load() {
			return io.EOF
		}
		return err
	}
	o.mu.Lock()
	if o.closed.Load() { // Close came while the request was made
		o.mu.Unlock()
		_ = resp.Body.Close()
		return io.EOF
	}
	o.live = resp.Body
	o.mu.Unlock()
	o.body, o.br = resp.Body, newNDJSONReader(resp.Body, maxEventLine)
	return nil
}

// advance moves the offset past ev.
func (o *OutputStream) advance(ev *OutputEvent) {
	o.idle = 0
	switch ev.Type {
	case "stdout", "stderr":
		o.offset = ev.Offset + int64(len(ev.Data))
	case "dropped":
		o.offset = ev.Offset + ev.Dropped
	case "exit":
		o.offset, o.done = ev.Offset, true
	}
}

// resume reopens a response that ended (readErr: how) before the exit event; after
// Close it gives io.EOF instead.
func (o *OutputStream) resume(readErr error) error {
	if o.body != nil { // nil after a reopen that failed: Next tries again
		_ = o.body.Close()
		o.mu.Lock()
		o.live = nil
		o.mu.Unlock()
	}
	o.body = nil
	if o.closed.Load() {
		o.done = true
		return io.EOF
	}
	if time.Since(o.started) >= quickEnd {
		o.idle = 0
	}
	if o.idle++; o.idle > maxResumes {
		o.done = true
		if readErr == nil || errors.Is(readErr, io.EOF) {
			readErr = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("sandbox: process %d: output stream ended: %w", o.p.ID, readErr)
	}
	if err := o.ctx.Err(); err != nil { // no reopen for a caller that gave up
		o.done = true
		return err
	}
	select {
	case <-o.ctx.Done():
		o.done = true
		if o.closed.Load() {
			return io.EOF
		}
		return o.ctx.Err()
	case <-time.After(resumePause * time.Duration(o.idle-1)):
	}
	return o.open()
}

// Next returns the next event, or io.EOF after the last one or after Close, or the
// context's error once it ended. An event line over 1 MiB (sandboxd sends at most
// 64 KiB of output an event) is an error matching ErrTooLarge, and the stream goes on:
// the next Next skips the rest of that line and returns the event after it. The
// skipped event's output is lost (the next event's Offset is past the end of the last
// one returned); a stream reopened after a cut before that next event came reports the
// long line again.
func (o *OutputStream) Next() (*OutputEvent, error) {
	for !o.done {
		if o.closed.Load() {
			o.done = true
			break
		}
		if o.body == nil {
			if err := o.resume(nil); err != nil {
				return nil, err
			}
			continue
		}
		line, err := o.br.line()
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("sandbox: output: %w", err)
		}
		if err != nil {
			if o.closed.Load() {
				o.done = true
				return nil, io.EOF
			}
			if !o.follow || o.ctx.Err() != nil {
				o.done = true
				if errors.Is(err, io.EOF) {
					return nil, io.EOF
				}
				return nil, fmt.Errorf("sandbox: output: %w", err)
			}
			if rerr := o.resume(err); rerr != nil {
				return nil, rerr
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, perr := parseOutput(line)
		if perr != nil {
			return nil, perr
		}
		if ev != nil {
			o.advance(ev)
			return ev, nil
		}
	}
	return nil, io.EOF
}

// Close ends the stream (the process keeps running). It may be called from another
// goroutine than Next's: a Next that waits then returns io.EOF, and no request follows.
func (o *OutputStream) Close() error {
	o.mu.Lock()
	o.closed.Store(true)
	b := o.live
	o.live = nil
	o.mu.Unlock()
	if o.cancel != nil {
		o.cancel()
	}
	if b == nil {
		return nil
	}
	return b.Close()
}

type wireOutput struct {
	Type     string `json:"type"`
	Offset   int64  `json:"offset"`
	Data     string `json:"data"`
	Bytes    int64  `json:"bytes"`
	ExitCode *int   `json:"exit_code"`
	Signal   int    `json:"signal"`
	TimedOut bool   `json:"timed_out"`
}

// parseOutput decodes one NDJSON line; nil for a type this version does not know.
func parseOutput(line []byte) (*OutputEvent, error) {
	var w wireOutput
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("sandbox: output: bad event: %w", err)
	}
	ev := &OutputEvent{Type: w.Type, Offset: w.Offset}
	switch w.Type {
	case "stdout", "stderr":
		b, err := base64.StdEncoding.DecodeString(w.Data)
		if err != nil {
			return nil, fmt.Errorf("sandbox: output: bad encoding: %w", err)
		}
		ev.Data = b
	case "dropped":
		ev.Dropped = w.Bytes
	case "exit":
		code := -1
		if w.ExitCode != nil {
			code = *w.ExitCode
		}
		ev.Exit = &ExitStatus{ExitCode: code, Signal: w.Signal, TimedOut: w.TimedOut}
	default:
		return nil, nil
	}
	return ev, nil
}
