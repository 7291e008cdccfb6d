package sandbox

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCodeBody(t *testing.T) {
	tests := []struct {
		name    string
		opts    CodeOptions
		want    string
		wantErr error
	}{
		{"default context", CodeOptions{}, `{"code":"1"}`, nil},
		{"context and timeout", CodeOptions{Context: "c1", Timeout: 1500 * time.Millisecond},
			`{"code":"1","context":"c1","timeout":1.5}`, nil},
		{"negative timeout", CodeOptions{Timeout: -time.Second}, "", ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := codeBody("1", tt.opts)
			if !errors.Is(err, tt.wantErr) || (err == nil && string(got) != tt.want) {
				t.Fatalf("codeBody = %s, %v; want %s, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestContextPath(t *testing.T) {
	tests := []struct {
		id, action, want string
		ok               bool
	}{
		{"c1", "", "/v1/contexts/c1", true},
		{"c1", "restart", "/v1/contexts/c1/restart", true},
		{"", "", "", false},
		{"a/b", "", "", false},
		{"a%2f", "", "", false},
	}
	for _, tt := range tests {
		got, err := contextPath(tt.id, tt.action)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("contextPath(%q, %q) = %q, %v", tt.id, tt.action, got, err)
		}
	}
}

func TestReadExecution(t *testing.T) {
	const end = `{"type":"end","execution_count":3,"truncated":false,"timed_out":false}` + "\n"
	tests := []struct {
		name    string
		body    string
		check   func(t *testing.T, ex *Execution, outs []string, results int)
		wantErr error
	}{
		{"output and value", `{"type":"start","context":"default"}` + "\n" +
			`{"type":"stdout","text":"a"}` + "\n" + `{"type":"stderr","text":"w"}` + "\n" +
			`{"type":"stdout","text":"b\n"}` + "\n" +
			`{"type":"result","data":{"text/plain":"42"},"is_main":true}` + "\n" + end,
			func(t *testing.T, ex *Execution, outs []string, results int) {
				if ex.Stdout != "ab\n" || ex.Stderr != "w" || ex.Text() != "42" || ex.ExecutionCount != 3 {
					t.Errorf("got %+v", ex)
				}
				if strings.Join(outs, "|") != "a|b\n" || results != 1 {
					t.Errorf("callbacks %q %d", outs, results)
				}
			}, nil},
		{"display png and error", `{"type":"display","data":{"image/png":"iVBORw0KGgo=","text/html":"<b>"}}` + "\n" +
			`{"type":"error","name":"ValueError","value":"v","traceback":"tb"}` + "\n" + end,
			func(t *testing.T, ex *Execution, _ []string, _ int) {
				png, err := ex.Results[0].PNG()
				if err != nil || string(png[:4]) != "\x89PNG" || ex.Results[0].HTML() != "<b>" || ex.Text() != "" {
					t.Errorf("png %q %v", png, err)
				}
				if ex.Error == nil || ex.Error.Name != "ValueError" || ex.Error.Traceback != "tb" {
					t.Errorf("error %+v", ex.Error)
				}
			}, nil},
		{"truncated", `{"type":"stdout","text":"x"}` + "\n" + `{"type":"truncated"}` + "\n" +
			`{"type":"end","execution_count":1,"truncated":true}` + "\n",
			func(t *testing.T, ex *Execution, _ []string, _ int) {
				if !ex.Truncated {
					t.Error("not truncated")
				}
			}, nil},
		{"timeout", `{"type":"error","name":"KeyboardInterrupt","value":"","traceback":""}` + "\n" +
			`{"type":"end","execution_count":1,"timed_out":true}` + "\n",
			func(t *testing.T, ex *Execution, _ []string, _ int) {
				if ex == nil || !ex.TimedOut || ex.Error.Name != "KeyboardInterrupt" {
					t.Errorf("got %+v", ex)
				}
			}, ErrCodeTimeout},
		{"no end", `{"type":"stdout","text":"x"}` + "\n", nil, errors.New("stream ended")},
		{"bad line", "nope\n", nil, errors.New("bad event")},
		{"line too long", `{"type":"stdout","text":"` + strings.Repeat("x", maxCodeEventLine) + "\"}\n", nil, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outs []string
			results := 0
			opts := CodeOptions{OnStdout: func(s string) { outs = append(outs, s) },
				OnResult: func(CodeResult) { results++ }}
			ex, err := readExecution(newNDJSONReader(strings.NewReader(tt.body), maxCodeEventLine), opts)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != nil && err == nil:
				t.Fatalf("no error, want %v", tt.wantErr)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr) && !strings.Contains(err.Error(), tt.wantErr.Error()):
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, ex, outs, results)
			}
		})
	}
	if !errors.Is(ErrCodeTimeout, ErrTimeout) {
		t.Error("ErrCodeTimeout does not match ErrTimeout")
	}
}

// TestLocalCode runs code contexts on a real sandboxd (kernel driver from the source
// tree) through every connection mode.
func TestLocalCode(t *testing.T) {
	driver, _ := filepath.Abs(filepath.Join("..", "..", "..", "src", "sandboxd", "driver", "kernel.py"))
	t.Setenv("SANDBOXD_KERNEL_DRIVER", driver)
	for _, mode := range []Mode{ModeDirect, ModeRouter, ModePodProxy} {
		t.Run(string(mode), func(t *testing.T) {
			sb := localSandbox(t, mode)
			ctx := testCtx(t)
			if _, err := sb.RunCode(ctx, "x = 21", CodeOptions{}); err != nil {
				t.Fatal(err)
			}
			ex, err := sb.RunCode(ctx, "print('hi')\nx * 2", CodeOptions{})
			if err != nil || ex.Text() != "42" || ex.Stdout != "hi\n" {
				t.Fatalf("RunCode = %+v, %v", ex, err)
			}
			cc, err := sb.Contexts().Create(ctx, ContextOptions{ID: "other"})
			if err != nil || cc.ID != "other" {
				t.Fatalf("Create = %+v, %v", cc, err)
			}
			ex, err = sb.RunCode(ctx, "1/0", CodeOptions{Context: "other"})
			if err != nil || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" ||
				!strings.Contains(ex.Error.Traceback, "1/0") {
				t.Fatalf("error run = %+v, %v", ex, err)
			}
			ex, err = sb.RunCode(ctx, "x", CodeOptions{Context: "other"})
			if err != nil || ex.Error == nil || ex.Error.Name != "NameError" {
				t.Fatalf("contexts share state: %+v, %v", ex, err)
			}
			ex, err = sb.RunCode(ctx, "while True: pass", CodeOptions{Context: "other", Timeout: 300 * time.Millisecond})
			if !errors.Is(err, ErrCodeTimeout) || ex == nil || ex.Error.Name != "KeyboardInterrupt" {
				t.Fatalf("timeout = %+v, %v", ex, err)
			}
			list, err := sb.Contexts().List(ctx)
			if err != nil || len(list) != 2 {
				t.Fatalf("List = %+v, %v", list, err)
			}
			if _, err := sb.Contexts().Restart(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			if ex, err = sb.RunCode(ctx, "x", CodeOptions{}); err != nil || ex.Error == nil {
				t.Fatalf("restart kept state: %+v, %v", ex, err)
			}
			if err := sb.Contexts().Interrupt(ctx, "other"); err != nil {
				t.Fatal(err)
			}
			if err := sb.Contexts().Delete(ctx, "other"); err != nil {
				t.Fatal(err)
			}
			if _, err := sb.Contexts().Get(ctx, "other"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get after delete: %v", err)
			}
		})
	}
}

// TestRunCodeOutputCap: an Execution holds at most maxCodeOutput bytes of output and
// results (cut at a UTF-8 boundary, then Truncated), a result counting its data and
// CodeResultOverhead, so results without data are bounded too; the callbacks get
// everything.
func TestRunCodeOutputCap(t *testing.T) {
	const end = `{"type":"end","execution_count":1}` + "\n"
	tests := []struct {
		name        string
		cap         int64
		body        string
		stdout      string
		stderr      string
		results     int
		truncated   bool
		stdoutCalls int
		resultCalls int
	}{
		{"under the cap", 100, `{"type":"stdout","text":"1234"}` + "\n" + `{"type":"stderr","text":"ab"}` + "\n" +
			`{"type":"result","data":{"text/plain":"x"},"is_main":true}` + "\n" + end, "1234", "ab", 1, false, 1, 1},
		{"over the cap", 10, `{"type":"stdout","text":"12345678"}` + "\n" + `{"type":"stderr","text":"abcd"}` + "\n" +
			`{"type":"result","data":{"text/plain":"x"},"is_main":true}` + "\n" + `{"type":"stdout","text":"zz"}` + "\n" +
			end, "12345678", "ab", 0, true, 2, 1},
		{"cut at a rune", 2, `{"type":"stdout","text":"aé"}` + "\n" + end, "a", "", 0, true, 1, 0},
		// each result costs CodeResultOverhead (64) besides its data: empty ones too
		{"empty results", 1024, strings.Repeat(`{"type":"display"}`+"\n", 1000) + end, "", "", 16, true, 0, 1000},
		{"result overhead", 64 + 11 + 64 + 10, `{"type":"result","data":{"text/plain":"x"},"is_main":true}` + "\n" +
			`{"type":"display","data":{"text/html":""}}` + "\n" + `{"type":"display"}` + "\n" + end, "", "", 2, true, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := maxCodeOutput
			maxCodeOutput = tc.cap
			defer func() { maxCodeOutput = old }()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/code/execute" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/x-ndjson")
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			var calls, onRes int
			ex, err := handleFor(t, srv).RunCode(testCtx(t), "x", CodeOptions{
				OnStdout: func(string) { calls++ }, OnResult: func(CodeResult) { onRes++ }})
			if err != nil {
				t.Fatal(err)
			}
			if ex.Stdout != tc.stdout || ex.Stderr != tc.stderr || len(ex.Results) != tc.results ||
				ex.Truncated != tc.truncated {
				t.Errorf("got stdout %q stderr %q %d results truncated %v", ex.Stdout, ex.Stderr, len(ex.Results),
					ex.Truncated)
			}
			if calls != tc.stdoutCalls || onRes != tc.resultCalls {
				t.Errorf("callbacks: %d OnStdout, %d OnResult; want %d, %d", calls, onRes, tc.stdoutCalls, tc.resultCalls)
			}
		})
	}
}
