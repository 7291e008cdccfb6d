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

// Limits of the process API.
const (
	maxInlineStdin = 8 << 20  // stdin given to a buffered run (sandboxd's limit)
	maxEventLine   = 1 << 20  // one NDJSON event (64 KiB of output, base64-encoded)
	stdinChunk     = 64 << 10 // one stdin request when copying Cmd.Stdin
)

// Cmd describes a process. Exactly one of Command and Args is set.
type Cmd struct {
	// Command runs through "/bin/sh -c" (pipes, redirects, globbing).
	Command string
	// Args is an argv run without a shell.
	Args []string
	// Env adds environment variables.
	Env map[string]string
	// Dir is the working directory, relative to sandboxd's root (default: the root).
	Dir string
	// Stdin is the process's standard input. Run (and StartBackground) reads it fully (at
	// most 8 MiB) before starting; when the call's context ends first, at most the Read
	// in progress completes (its data is dropped) and no further Read is made. Start
	// copies it while the process runs and closes stdin at EOF. Nil: no input (Run) or an
	// open stdin for Process.Stdin (Start).
	Stdin io.Reader
	// Stdout and Stderr receive the output as it arrives (Start only). Nil discards.
	Stdout, Stderr io.Writer
	// Timeout is enforced by sandboxd (0: its default, 300 s, for Run; none for Start).
	// The context bounds the call as well; without a deadline Run and Exec end at this
	// time (or the 300 s) plus Options.DefaultTimeout.
	Timeout time.Duration
	// MaxOutputBytes caps the buffered stdout and stderr of Run (0: sandboxd's cap).
	MaxOutputBytes int
	// PTY runs the process on a pseudo-terminal of this size (Start only).
	PTY *PTYSize
}

// PTYSize is a terminal size.
type PTYSize struct{ Cols, Rows int }

// Result is the outcome of a process run to completion. A non-zero exit is not an error.
type Result struct {
	ID              int
	Stdout, Stderr  string // exact bytes (not necessarily UTF-8)
	ExitCode        int    // -1 when killed by a signal
	Signal          int    // the signal that ended the process, 0 if none
	TimedOut        bool   // sandboxd killed it at the timeout
	StdoutTruncated bool
	StderrTruncated bool
	Duration        time.Duration
}

// ExecutionResult is the name the upstream SDK uses for Result.
type ExecutionResult = Result

// ExitStatus is how a streamed process ended.
type ExitStatus struct {
	ExitCode int
	Signal   int
	TimedOut bool
}

// Success reports exit code 0 without signal or timeout.
func (e *ExitStatus) Success() bool { return e.ExitCode == 0 && e.Signal == 0 && !e.TimedOut }

func (cmd *Cmd) request(ctx context.Context, buffered bool) (map[string]any, error) {
	req := map[string]any{}
	switch {
	case cmd.Command != "" && len(cmd.Args) == 0:
		req["command"] = cmd.Command
	case cmd.Command == "" && len(cmd.Args) > 0:
		req["command"] = cmd.Args
	default:
		return nil, fmt.Errorf("%w: set exactly one of Cmd.Command and Cmd.Args", ErrInvalidArgument)
	}
	if len(cmd.Env) > 0 {
		req["env"] = cmd.Env
	}
	if cmd.Dir != "" {
		if _, err := cleanPath(cmd.Dir, true); err != nil {
			return nil, err
		}
		req["cwd"] = cmd.Dir
	}
	if cmd.Timeout > 0 {
		req["timeout_seconds"] = cmd.Timeout.Seconds()
	}
	if buffered {
		req["encoding"] = "base64"
		if cmd.MaxOutputBytes > 0 {
			req["max_output_bytes"] = cmd.MaxOutputBytes
		}
		if cmd.Stdin != nil {
			b, err := readInlineStdin(ctx, cmd.Stdin, "use Start")
			if err != nil {
				return nil, err
			}
			req["stdin_b64"] = base64.StdEncoding.EncodeToString(b)
		}
	} else if cmd.PTY != nil {
		req["pty"] = map[string]int{"cols": cmd.PTY.Cols, "rows": cmd.PTY.Rows}
	}
	return req, nil
}

// readInlineStdin reads r fully (at most maxInlineStdin bytes) for a request body. A
// *bytes.Reader, *strings.Reader or *bytes.Buffer (they never block) is read here. Any
// other reader is read on a goroutine of its own so that ctx's end is noticed while a
// Read blocks, through a gate that fails every later Read once the call has given up:
// at most the one Read in progress then still completes (its data is dropped), and the
// reader is left alone after it (as os/exec's stdin copier is, at most one Read late).
func readInlineStdin(ctx context.Context, r io.Reader, hint string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b []byte
	var err error
	switch r.(type) {
	case *bytes.Reader, *strings.Reader, *bytes.Buffer:
		b, err = io.ReadAll(io.LimitReader(r, maxInlineStdin+1))
	default:
		type result struct {
			b   []byte
			err error
		}
		ch := make(chan result, 1)
		g := &gatedReader{r: r}
		go func() {
			b, err := io.ReadAll(io.LimitReader(g, maxInlineStdin+1))
			ch <- result{b, err}
		}()
		select {
		case res := <-ch:
			b, err = res.b, res.err
		case <-ctx.Done():
			g.closed.Store(true)
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: read stdin: %w", err)
	}
	if len(b) > maxInlineStdin {
		return nil, fmt.Errorf("%w: stdin over %d bytes (%s)", ErrTooLarge, maxInlineStdin, hint)
	}
	return b, nil
}

// gatedReader reads r until closed is set; then every Read fails.
type gatedReader struct {
	r      io.Reader
	closed atomic.Bool
}

func (g *gatedReader) Read(b []byte) (int, error) {
	if g.closed.Load() {
		return 0, errGaveUp
	}
	return g.r.Read(b)
}

var errGaveUp = errors.New("sandbox: the call gave up reading stdin")

// runTime is the time a run or code execution asking for timeout takes at most in
// sandboxd (0: sandboxd's default, DefaultRunTimeout), for the default limit.
func runTime(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return DefaultRunTimeout
	}
	return timeout
}

// Run runs command through "/bin/sh -c" to completion and returns its output.
func (s *Sandbox) Run(ctx context.Context, command string) (*Result, error) {
	return s.Exec(ctx, Cmd{Command: command})
}

// Exec runs cmd to completion with buffered output (Stdout, Stderr and PTY are
// ignored).
func (s *Sandbox) Exec(ctx context.Context, cmd Cmd) (*Result, error) {
	if _, err := s.target(); err != nil {
		return nil, err
	}
	req, err := cmd.request(ctx, true)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(req)
	resp, _, err := s.send(ctx, call{op: "run", method: http.MethodPost, path: "/v1/processes/run",
		body: body, contentType: "application/json", limit: limitRun, runTimeout: runTime(cmd.Timeout)})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		ID              int    `json:"id"`
		ExitCode        int    `json:"exit_code"`
		Signal          int    `json:"signal"`
		TimedOut        bool   `json:"timed_out"`
		Stdout          string `json:"stdout"`
		Stderr          string `json:"stderr"`
		StdoutTruncated bool   `json:"stdout_truncated"`
		StderrTruncated bool   `json:"stderr_truncated"`
		DurationMS      int64  `json:"duration_ms"`
	}
	// Two capped base64 streams plus framing.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 3*(64<<20))).Decode(&r); err != nil {
		return nil, fmt.Errorf("sandbox: run: bad response: %w", err)
	}
	out, err1 := base64.StdEncoding.DecodeString(r.Stdout)
	errb, err2 := base64.StdEncoding.DecodeString(r.Stderr)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("sandbox: run: bad output encoding: %w", err)
	}
	return &Result{ID: r.ID, Stdout: string(out), Stderr: string(errb), ExitCode: r.ExitCode, Signal: r.Signal,
		TimedOut: r.TimedOut, StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated,
		Duration: time.Duration(r.DurationMS) * time.Millisecond}, nil
}

// Process is a running process whose output streams to the Cmd's writers.
type Process struct {
	ID  int // sandboxd's process id
	PID int // the pid inside the sandbox

	s      *Sandbox
	t      target
	ctx    context.Context    // the caller's (values only are used after it ends)
	cancel context.CancelFunc // ends the stream
	done   chan struct{}
	exit   *ExitStatus
	err    error

	stdinMu       ctxMutex // one stdin request at a time, in order
	stdinClosed   bool     // guarded by stdinMu
	stdinCloseErr error    // a PTY close that failed (it may have been sent); guarded by stdinMu
	pty           bool     // on a pseudo-terminal: its stdin close writes an EOF character

	errMu    sync.Mutex
	stdinErr error // the first failure of copying Cmd.Stdin (copyStdin)
}

type event struct {
	Type     string `json:"type"`
	ID       int    `json:"id"`
	PID      int    `json:"pid"`
	Data     string `json:"data"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal"`
	TimedOut bool   `json:"timed_out"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// Start starts cmd and streams its output (chunked NDJSON) to cmd.Stdout and
// cmd.Stderr. Cancelling ctx ends the stream and kills the process group (so does a
// broken stream or a failing writer). Call Wait to release the stream's goroutine.
// Without a context deadline, Options.DefaultTimeout bounds the start (until the
// stream's first byte); the stream then lasts as long as ctx, unless it gets no byte
// (sandboxd sends keepalives) for Options.StreamIdleTimeout: Wait then returns an error
// wrapping a *StreamIdleError, and the process is killed as for any broken stream.
func (s *Sandbox) Start(ctx context.Context, cmd Cmd) (*Process, error) {
	if _, err := s.target(); err != nil {
		return nil, err
	}
	req, err := cmd.request(ctx, false)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(req)
	sctx, cancel := context.WithCancel(ctx)
	resp, t, err := s.send(sctx, call{op: "start", method: http.MethodPost, path: "/v1/processes",
		body: body, contentType: "application/json", limit: limitFirstByte})
	if err != nil {
		cancel()
		return nil, err
	}
	br := newNDJSONReader(resp.Body, maxEventLine)
	first, err := readEvent(br)
	for err == nil && !knownEvent[first.Type] { // a keepalive (or a newer type) before start
		first, err = readEvent(br)
	}
	if err != nil || first.Type != "start" {
		cancel()
		resp.Body.Close()
		if err == nil {
			err = fmt.Errorf("first event is %q, not start", first.Type)
		}
		return nil, fmt.Errorf("sandbox: start: %w", err)
	}
	p := &Process{ID: first.ID, PID: first.PID, s: s, t: t, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		pty: cmd.PTY != nil}
	go p.pump(resp.Body, br, cmd.Stdout, cmd.Stderr)
	if cmd.Stdin != nil {
		go p.copyStdin(sctx, cmd.Stdin)
	}
	return p, nil
}

// knownEvent: the event types of a process stream this version knows. Others (a
// keepalive that sandboxd sends on long silences, types of newer versions) are ignored.
var knownEvent = map[string]bool{"start": true, "stdout": true, "stderr": true, "exit": true, "error": true}

func readEvent(br *ndjsonReader) (*event, error) {
	var ev event
	if err := br.decode(&ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// pump reads events until the exit event or an error, then releases everything.
func (p *Process) pump(body io.ReadCloser, br *ndjsonReader, stdout, stderr io.Writer) {
	defer close(p.done)
	defer p.cancel()
	defer body.Close()
	for {
		ev, err := readEvent(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			p.err = fmt.Errorf("sandbox: process %d: stream ended: %w", p.ID, err)
			p.killDetached()
			return
		}
		switch ev.Type { // other types (a keepalive) are ignored
		case "stdout", "stderr":
			w := stdout
			if ev.Type == "stderr" {
				w = stderr
			}
			if w == nil {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(ev.Data)
			if err != nil {
				p.err = fmt.Errorf("sandbox: process %d: bad output encoding: %w", p.ID, err)
				p.killDetached()
				return
			}
			if _, err := w.Write(b); err != nil {
				p.err = fmt.Errorf("sandbox: process %d: write %s: %w", p.ID, ev.Type, err)
				p.killDetached()
				return
			}
		case "exit":
			p.exit = &ExitStatus{ExitCode: ev.ExitCode, Signal: ev.Signal, TimedOut: ev.TimedOut}
			// Read the end of the chunked body so the connection is reused, not reset;
			// a server that does not end it within drainTimeout gets the stream cut.
			t := time.AfterFunc(drainTimeout, p.cancel)
			_, _ = io.Copy(io.Discard, io.LimitReader(br, 64<<10))
			t.Stop()
			return
		case "error":
			p.err = &HTTPError{Op: "process stream", StatusCode: 200, Code: ev.Code, Message: ev.Message}
			return
		}
	}
}

// killDetached kills a process whose stream ended before its exit event (context
// cancelled, connection lost, output writer failed), so that nothing keeps running
// unobserved. Best effort, bounded by killTimeout, on a context detached from the
// caller's cancellation.
func (p *Process) killDetached() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), killTimeout)
	defer cancel()
	resp, err := p.s.c.conn.do(ctx, p.t, call{op: "kill", method: http.MethodDelete,
		path: "/v1/processes/" + strconv.Itoa(p.ID), idempotent: true})
	if err == nil {
		resp.Body.Close()
	}
}

// Bounds of the clean-up work of a stream.
const (
	killTimeout  = 5 * time.Second
	drainTimeout = 2 * time.Second
)

// Wait waits for the process to end and the output to be written. A non-zero exit is
// not an error; a broken stream or cancelled context is, and so is a failure to copy
// Cmd.Stdin (a failed read of it, or a stdin request that failed: stdin was then closed
// early). Each is returned as it is (e.g. a *HTTPError for the stream's error event);
// both are joined (errors.Join), as in os/exec. The exit status is returned with such an
// error when the process exited.
func (p *Process) Wait() (*ExitStatus, error) {
	<-p.done
	p.errMu.Lock()
	serr := p.stdinErr
	p.errMu.Unlock()
	switch {
	case serr == nil:
		return p.exit, p.err // as it is: err.(*HTTPError) and err == x work
	case p.err == nil:
		return p.exit, serr
	}
	return p.exit, errors.Join(p.err, serr)
}

// Done is closed when the stream has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

func (p *Process) control(ctx context.Context, op, action string, body []byte, q url.Values,
	idempotent bool) error {
	select {
	case <-p.done:
		return fmt.Errorf("%w: process %d has ended", ErrClosed, p.ID)
	default:
	}
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	path := "/v1/processes/" + strconv.Itoa(p.ID)
	method := http.MethodDelete
	if action != "" {
		path += "/" + action
		method = http.MethodPost
		if body == nil {
			body = []byte{}
		}
	}
	resp, err := p.s.c.conn.do(ctx, p.t, call{op: op, method: method, path: path, query: q, body: body,
		contentType: ct, idempotent: idempotent})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Signal sends a signal to the process group: a name ("SIGINT", "TERM") or a number.
func (p *Process) Signal(ctx context.Context, sig string) error {
	var v any = sig
	if n, err := strconv.Atoi(sig); err == nil {
		v = n
	}
	b, _ := json.Marshal(map[string]any{"signal": v})
	return p.control(ctx, "signal", "signal", b, nil, false)
}

// Resize changes the size of the process's PTY.
func (p *Process) Resize(ctx context.Context, cols, rows int) error {
	b, _ := json.Marshal(map[string]int{"cols": cols, "rows": rows})
	return p.control(ctx, "resize", "resize", b, nil, false)
}

// Kill sends SIGKILL to the process group (retried like other idempotent calls).
func (p *Process) Kill(ctx context.Context) error { return p.control(ctx, "kill", "", nil, nil, true) }

// WriteStdin sends data to the process's stdin (one request; sandboxd queues it). Stdin
// requests go one at a time, in order: waiting for an earlier one is bounded by ctx.
func (p *Process) WriteStdin(ctx context.Context, data []byte) error {
	if err := p.stdinMu.lock(ctx); err != nil {
		return fmt.Errorf("sandbox: process %d: stdin: %w", p.ID, err)
	}
	defer p.stdinMu.unlock()
	if p.stdinClosed {
		return fmt.Errorf("%w: stdin of process %d is closed", ErrClosed, p.ID)
	}
	return p.control(ctx, "stdin", "stdin", append([]byte{}, data...), nil, false)
}

// CloseStdin closes the process's stdin once the queued data is written. Waiting for a
// stdin request in flight is bounded by ctx.
func (p *Process) CloseStdin(ctx context.Context) error {
	if err := p.stdinMu.lock(ctx); err != nil {
		return fmt.Errorf("sandbox: process %d: stdin close: %w", p.ID, err)
	}
	defer p.stdinMu.unlock()
	if p.stdinClosed {
		return p.stdinCloseErr
	}
	if err := ctx.Err(); err != nil { // nothing sent: a later call may close it
		return fmt.Errorf("sandbox: process %d: stdin close: %w", p.ID, err)
	}
	// sandboxd's close of a pipe is idempotent (a closed stdin is closed again without
	// error), so it is retried like other idempotent calls, and a close that failed may
	// be called again. On a PTY each close writes the terminal's EOF character (^D): a
	// resend after a lost answer would send a second one (ending the shell after cat), so
	// it goes once, and a failed one counts as sent (it may have been): later calls
	// return its error instead of sending another.
	err := p.control(ctx, "stdin close", "stdin/close", nil, nil, !p.pty)
	if err == nil || p.pty {
		p.stdinClosed = true
		p.stdinCloseErr = err
	}
	return err
}

// Stdin returns a writer to the process's stdin: each Write is one request, Close
// closes stdin. ctx bounds every request.
func (p *Process) Stdin(ctx context.Context) io.WriteCloser { return &stdinWriter{ctx: ctx, p: p} }

type stdinWriter struct {
	ctx context.Context
	p   *Process
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	if err := w.p.WriteStdin(w.ctx, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *stdinWriter) Close() error { return w.p.CloseStdin(w.ctx) }

// copyStdin copies r to stdin in chunks and closes stdin at EOF. It stops when the
// process ends; a Read that blocks keeps the goroutine until it returns (as os/exec). A
// full stdin queue (429) is backpressure: the chunk is sent again, with back-off, for as
// long as the process runs. A failed Read, or a stdin request that failed while the
// process still takes input, is recorded for Wait and stdin is closed (the process is
// killed when that fails too, or when the close at EOF failed, retries included): the
// process must not wait for input that will never come. Once the process has ended
// nothing is recorded.
func (p *Process) copyStdin(ctx context.Context, r io.Reader) {
	buf := make([]byte, stdinChunk)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := p.writeStdinWaiting(ctx, buf[:n]); err != nil {
				if !p.inputGone(ctx, err) {
					p.stdinFailed(ctx, fmt.Errorf("sandbox: process %d: write stdin: %w", p.ID, err), true)
				}
				return
			}
		}
		if rerr == io.EOF {
			if err := p.CloseStdin(ctx); err != nil && !p.inputGone(ctx, err) {
				p.stdinFailed(ctx, fmt.Errorf("sandbox: process %d: close stdin: %w", p.ID, err), false)
			}
			return
		}
		if rerr != nil {
			if !p.inputGone(ctx, nil) {
				p.stdinFailed(ctx, fmt.Errorf("sandbox: process %d: read Cmd.Stdin: %w", p.ID, rerr), true)
			}
			return
		}
	}
}

// writeStdinWaiting is WriteStdin that waits out a full stdin queue (429: nothing was
// queued) with back-off, until the process or ctx ends.
func (p *Process) writeStdinWaiting(ctx context.Context, b []byte) error {
	delay := retryDelay
	for {
		err := p.WriteStdin(ctx, b)
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusTooManyRequests {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-p.done:
			t.Stop()
			return err
		case <-t.C:
		}
		if delay *= 2; delay > time.Second {
			delay = time.Second
		}
	}
}

// inputGone: a stdin request failed (or err is nil: a Read failed) because the process takes no more input (it ended,
// closed its stdin, or stdin was closed through the Process) or because the stream's
// context ended (Wait reports that): not an error of its own, as os/exec ignores EPIPE.
func (p *Process) inputGone(ctx context.Context, err error) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	if ctx.Err() != nil || errors.Is(err, ErrClosed) {
		return true
	}
	var he *HTTPError
	return errors.As(err, &he) && ((he.StatusCode == http.StatusNotFound && he.Code == "NOT_FOUND") ||
		he.Code == "FAILED_PRECONDITION")
}

// stdinFailed records err for Wait, then closes stdin (with closeStdin; bounded by
// killTimeout, whatever ctx says) and kills the process when that fails or was not
// tried (a failed close).
func (p *Process) stdinFailed(ctx context.Context, err error, closeStdin bool) {
	p.errMu.Lock()
	if p.stdinErr == nil {
		p.stdinErr = err
	}
	p.errMu.Unlock()
	if closeStdin {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if p.CloseStdin(cctx) == nil {
			return
		}
	}
	p.killDetached()
}

// ProcessInfo describes a process listed by sandboxd.
type ProcessInfo struct {
	ID        int       `json:"id"`
	PID       int       `json:"pid"`
	Command   []string  `json:"command"`
	PTY       bool      `json:"pty"`
	Running   bool      `json:"running"`
	StartedAt time.Time `json:"started_at"`
}

// Processes lists the processes sandboxd is running.
func (s *Sandbox) Processes(ctx context.Context) ([]ProcessInfo, error) {
	resp, _, err := s.send(ctx, call{op: "list processes", method: http.MethodGet, path: "/v1/processes",
		idempotent: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Processes []ProcessInfo `json:"processes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("sandbox: list processes: bad response: %w", err)
	}
	return r.Processes, nil
}

// Health checks that sandboxd answers /v1/health.
func (s *Sandbox) Health(ctx context.Context) error {
	resp, _, err := s.send(ctx, call{op: "health", method: http.MethodGet, path: "/v1/health", idempotent: true})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.Body.Close()
}
