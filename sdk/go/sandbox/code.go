package sandbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Stateful code execution (docs/code-interpreter.md): sandboxd keeps one Python kernel
// per code context; RunCode sends code to one and reads its events (NDJSON) as they
// come.

// maxCodeEventLine bounds one event of an execution (a display event carries a whole
// image; sandboxd cuts an execution's events at 16 MiB by default).
const maxCodeEventLine = 40 << 20

// MaxCodeOutput caps what an Execution holds: its Stdout, Stderr and its Results
// together (192 MiB, as Exec's buffered answer), each result counting its data (MIME
// types and values) and CodeResultOverhead. Past it the Execution is cut and marked
// Truncated; the callbacks still get everything, and the code runs on.
const MaxCodeOutput = 192 << 20

// CodeResultOverhead is what each result counts against MaxCodeOutput besides its data,
// so that results with little or no data (a display event without any) are bounded too.
const CodeResultOverhead = 64

// maxCodeOutput is MaxCodeOutput (a variable for tests).
var maxCodeOutput int64 = MaxCodeOutput

// ErrCodeTimeout is returned (with the Execution so far) when RunCode's timeout hit:
// the kernel was interrupted, or restarted when the interrupt did not stop it. It
// matches ErrTimeout as well.
var ErrCodeTimeout = fmt.Errorf("%w: code execution", ErrTimeout)

// CodeOptions are the options of RunCode.
type CodeOptions struct {
	// Context is the code context's id; "" is the sandbox's default context (created
	// on first use, id "default").
	Context string
	// Timeout interrupts the code after this long (0: sandboxd's default, 300 s).
	// Without a context deadline RunCode ends at this time plus Options.DefaultTimeout.
	Timeout time.Duration
	// OnStdout and OnStderr receive output as it arrives; OnResult each rich result.
	OnStdout, OnStderr func(text string)
	OnResult           func(r CodeResult)
}

// CodeResult is rich output: the value of the last expression (IsMain) or something
// shown with display(). Data maps mime types to text; "image/png" is base64.
type CodeResult struct {
	Data   map[string]string
	IsMain bool
}

// Text is the text/plain representation ("" if none).
func (r CodeResult) Text() string { return r.Data["text/plain"] }

// HTML is the text/html representation ("" if none).
func (r CodeResult) HTML() string { return r.Data["text/html"] }

// JSON is the application/json representation as JSON text ("" if none).
func (r CodeResult) JSON() string { return r.Data["application/json"] }

// PNG decodes the image/png representation (nil, nil when there is none).
func (r CodeResult) PNG() ([]byte, error) {
	v, ok := r.Data["image/png"]
	if !ok {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(v)
}

// CodeError is an exception raised by the code.
type CodeError struct {
	Name, Value, Traceback string
}

// Execution is the outcome of RunCode.
type Execution struct {
	Stdout, Stderr string
	Results        []CodeResult
	Error          *CodeError // the exception the code raised, if any
	ExecutionCount int
	Truncated      bool // output was cut at sandboxd's limit, or at MaxCodeOutput here
	TimedOut       bool
}

// Text is the text/plain of the main result (the last expression's value), "" if none.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMain {
			return r.Text()
		}
	}
	return ""
}

// CodeContext is a code context: a kernel whose state lives across RunCode calls.
// State is starting, idle, busy or dead (started again by the next execution).
type CodeContext struct {
	ID             string `json:"id"`
	Language       string `json:"language"`
	Cwd            string `json:"cwd"`
	State          string `json:"state"`
	ExecutionCount int    `json:"execution_count"`
}

type codeEvent struct {
	Type           string            `json:"type"`
	Text           string            `json:"text"`
	Data           map[string]string `json:"data"`
	IsMain         bool              `json:"is_main"`
	Name           string            `json:"name"`
	Value          string            `json:"value"`
	Traceback      string            `json:"traceback"`
	ExecutionCount int               `json:"execution_count"`
	Truncated      bool              `json:"truncated"`
	TimedOut       bool              `json:"timed_out"`
}

func codeBody(code string, opts CodeOptions) ([]byte, error) {
	req := map[string]any{"code": code}
	if opts.Context != "" {
		req["context"] = opts.Context
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout", ErrInvalidArgument)
	}
	if opts.Timeout > 0 {
		req["timeout"] = opts.Timeout.Seconds()
	}
	return json.Marshal(req)
}

// RunCode runs Python code in a code context whose state persists across calls. Output
// streams to the options' callbacks as it comes; the Execution holds all of it, the rich
// results and the error the code raised (which is not an error of RunCode). Cancelling
// ctx interrupts the code.
func (s *Sandbox) RunCode(ctx context.Context, code string, opts CodeOptions) (*Execution, error) {
	if _, err := s.target(); err != nil {
		return nil, err
	}
	body, err := codeBody(code, opts)
	if err != nil {
		return nil, err
	}
	resp, _, err := s.send(ctx, call{op: "run code", method: http.MethodPost, path: "/v1/code/execute",
		body: body, contentType: "application/json", limit: limitRun, runTimeout: runTime(opts.Timeout)})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readExecution(newNDJSONReader(resp.Body, maxCodeEventLine), opts)
}

func readCodeEvent(br *ndjsonReader) (*codeEvent, error) {
	var ev codeEvent
	if err := br.decode(&ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// readExecution folds the events up to the end event into an Execution, holding at
// most maxCodeOutput bytes of output and results.
func readExecution(br *ndjsonReader, opts CodeOptions) (*Execution, error) {
	var ex Execution
	var out, errs strings.Builder
	room := maxCodeOutput
	for {
		ev, err := readCodeEvent(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("sandbox: run code: stream ended: %w", err)
		}
		switch ev.Type {
		case "stdout", "stderr":
			b, cb := &out, opts.OnStdout
			if ev.Type == "stderr" {
				b, cb = &errs, opts.OnStderr
			}
			text := ev.Text
			if int64(len(text)) > room {
				text = cutUTF8(text, room)
				ex.Truncated = true
			}
			b.WriteString(text)
			room -= int64(len(text))
			if cb != nil {
				cb(ev.Text)
			}
		case "result", "display":
			r := CodeResult{Data: ev.Data, IsMain: ev.IsMain}
			if r.Data == nil {
				r.Data = map[string]string{}
			}
			if n := resultSize(r); n <= room {
				ex.Results = append(ex.Results, r)
				room -= n
			} else {
				ex.Truncated = true
			}
			if opts.OnResult != nil {
				opts.OnResult(r)
			}
		case "error":
			ex.Error = &CodeError{Name: ev.Name, Value: ev.Value, Traceback: ev.Traceback}
		case "truncated":
			ex.Truncated = true
		case "end":
			ex.Stdout, ex.Stderr = out.String(), errs.String()
			ex.ExecutionCount = ev.ExecutionCount
			ex.Truncated = ex.Truncated || ev.Truncated
			ex.TimedOut = ev.TimedOut
			if ex.TimedOut {
				return &ex, ErrCodeTimeout
			}
			return &ex, nil
		}
	}
}

// resultSize is what a result counts against maxCodeOutput: its data and
// CodeResultOverhead.
func resultSize(r CodeResult) int64 {
	n := int64(CodeResultOverhead)
	for k, v := range r.Data {
		n += int64(len(k) + len(v))
	}
	return n
}

// cutUTF8 is s cut to at most n bytes, not inside a UTF-8 sequence.
func cutUTF8(s string, n int64) string {
	if n <= 0 {
		return ""
	}
	i := int(n)
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Contexts manages the sandbox's code contexts.
func (s *Sandbox) Contexts() *Contexts { return &Contexts{s: s} }

// Contexts creates, lists, restarts, interrupts and deletes code contexts.
type Contexts struct{ s *Sandbox }

// ContextOptions are the options of Contexts.Create.
type ContextOptions struct {
	ID  string // "" lets sandboxd pick one
	Cwd string // working directory relative to sandboxd's root ("" : the root)
}

func contextPath(id, action string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/?#%") {
		return "", fmt.Errorf("%w: context id %q", ErrInvalidArgument, id)
	}
	p := "/v1/contexts/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p, nil
}

func (c *Contexts) call(ctx context.Context, cl call, out any) error {
	if _, err := c.s.target(); err != nil {
		return err
	}
	resp, _, err := c.s.send(ctx, cl)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("sandbox: %s: bad response: %w", cl.op, err)
	}
	return nil
}

// Create starts a new Python context.
func (c *Contexts) Create(ctx context.Context, opts ContextOptions) (*CodeContext, error) {
	req := map[string]any{"language": "python"}
	if opts.ID != "" {
		req["id"] = opts.ID
	}
	if opts.Cwd != "" {
		req["cwd"] = opts.Cwd
	}
	body, _ := json.Marshal(req)
	var cc CodeContext
	err := c.call(ctx, call{op: "create context", method: http.MethodPost, path: "/v1/contexts", body: body,
		contentType: "application/json"}, &cc)
	if err != nil {
		return nil, err
	}
	return &cc, nil
}

// List returns the contexts, oldest first.
func (c *Contexts) List(ctx context.Context) ([]CodeContext, error) {
	var r struct {
		Contexts []CodeContext `json:"contexts"`
	}
	err := c.call(ctx, call{op: "list contexts", method: http.MethodGet, path: "/v1/contexts", idempotent: true}, &r)
	return r.Contexts, err
}

func (c *Contexts) one(ctx context.Context, op, method, id, action string) (*CodeContext, error) {
	p, err := contextPath(id, action)
	if err != nil {
		return nil, err
	}
	var cc CodeContext
	cl := call{op: op, method: method, path: p, idempotent: method == http.MethodGet}
	if method == http.MethodPost {
		cl.body, cl.contentType = []byte("{}"), "application/json"
	}
	if err := c.call(ctx, cl, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// Get returns one context.
func (c *Contexts) Get(ctx context.Context, id string) (*CodeContext, error) {
	return c.one(ctx, "get context", http.MethodGet, id, "")
}

// Restart kills and restarts the context's kernel: its state is lost.
func (c *Contexts) Restart(ctx context.Context, id string) (*CodeContext, error) {
	return c.one(ctx, "restart context", http.MethodPost, id, "restart")
}

// Interrupt interrupts the code the context runs (KeyboardInterrupt); the state is kept.
func (c *Contexts) Interrupt(ctx context.Context, id string) error {
	p, err := contextPath(id, "interrupt")
	if err != nil {
		return err
	}
	return c.call(ctx, call{op: "interrupt context", method: http.MethodPost, path: p, body: []byte("{}"),
		contentType: "application/json", idempotent: true}, nil)
}

// Delete kills the context's kernel and forgets the context. A missing context is
// ErrNotFound, except on a retry after an attempt whose answer was lost (a cut
// connection, a proxy's 502/503/504): that attempt may have deleted it, and Delete
// succeeds (as Files.Delete).
func (c *Contexts) Delete(ctx context.Context, id string) error {
	p, err := contextPath(id, "")
	if err != nil {
		return err
	}
	var mayHaveRun bool
	err = c.call(ctx, call{op: "delete context", method: http.MethodDelete, path: p, idempotent: true,
		mayHaveRun: &mayHaveRun}, nil)
	if err != nil && mayHaveRun && sandboxdStatus(err) == http.StatusNotFound {
		return nil
	}
	return err
}
