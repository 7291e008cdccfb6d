package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// dataPlaneSuite exercises every process and file call against a live sandboxd behind
// sb, whatever the connection mode. It is shared by the local tests (a sandboxd binary
// behind fake router / pod proxy servers) and the integration tests (the real stack).
func dataPlaneSuite(t *testing.T, sb *Sandbox) {
	t.Run("Health", func(t *testing.T) {
		if err := sb.Health(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Run", func(t *testing.T) { suiteRun(t, sb) })
	t.Run("Exec", func(t *testing.T) { suiteExec(t, sb) })
	t.Run("Start", func(t *testing.T) { suiteStart(t, sb) })
	t.Run("Stdin", func(t *testing.T) { suiteStdin(t, sb) })
	t.Run("Signal", func(t *testing.T) { suiteSignal(t, sb) })
	t.Run("Files", func(t *testing.T) { suiteFiles(t, sb) })
	t.Run("FileStreams", func(t *testing.T) { suiteFileStreams(t, sb) })
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func suiteRun(t *testing.T, sb *Sandbox) {
	tests := []struct {
		cmd       string
		out, errs string
		code      int
	}{
		{"echo hello", "hello\n", "", 0},
		{"echo out; echo err >&2; exit 3", "out\n", "err\n", 3},
		{"printf '\\377\\000x'", "\xff\x00x", "", 0},
		{"echo a | tr a b", "b\n", "", 0},
	}
	for _, tc := range tests {
		r, err := sb.Run(testCtx(t), tc.cmd)
		if err != nil {
			t.Fatalf("%q: %v", tc.cmd, err)
		}
		if r.Stdout != tc.out || r.Stderr != tc.errs || r.ExitCode != tc.code || r.TimedOut {
			t.Errorf("%q: got %+v", tc.cmd, r)
		}
	}
}

func suiteExec(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	if err := sb.Files().WriteFile(ctx, "execdir/marker", []byte("m")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cmd  Cmd
		out  string
		code int
		to   bool
	}{
		{"argv without shell", Cmd{Args: []string{"echo", "$HOME", "a b"}}, "$HOME a b\n", 0, false},
		{"env", Cmd{Command: "echo $FOO", Env: map[string]string{"FOO": "bar"}}, "bar\n", 0, false},
		{"dir", Cmd{Command: "ls", Dir: "execdir"}, "marker\n", 0, false},
		{"stdin", Cmd{Command: "wc -c", Stdin: strings.NewReader("12345")}, "5\n", 0, false},
		{"timeout", Cmd{Command: "sleep 5", Timeout: 300 * time.Millisecond}, "", -1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sb.Exec(ctx, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(r.Stdout) != strings.TrimSpace(tc.out) || r.TimedOut != tc.to ||
				(!tc.to && r.ExitCode != tc.code) {
				t.Errorf("got %+v", r)
			}
		})
	}
	if _, err := sb.Exec(ctx, Cmd{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty Cmd: %v", err)
	}
	if _, err := sb.Exec(ctx, Cmd{Args: []string{"/no/such/binary"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing binary: %v", err)
	}
	if err := sb.Files().Delete(ctx, "execdir", true); err != nil {
		t.Error(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the stream goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func suiteStart(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	var out, errs syncBuffer
	p, err := sb.Start(ctx, Cmd{Command: "for i in 1 2 3; do echo $i; done; echo e >&2; exit 7",
		Stdout: &out, Stderr: &errs})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID <= 0 || p.PID <= 0 {
		t.Errorf("ids %d %d", p.ID, p.PID)
	}
	st, err := p.Wait()
	if err != nil || st.ExitCode != 7 || st.Success() {
		t.Fatalf("Wait: %+v %v", st, err)
	}
	if out.String() != "1\n2\n3\n" || errs.String() != "e\n" {
		t.Errorf("out %q err %q", out.String(), errs.String())
	}
	// Output arrives while the process runs: read the first line through a pipe before
	// the process is told to finish.
	pr, pw := io.Pipe()
	p, err = sb.Start(ctx, Cmd{Command: "echo first; read x; echo got $x", Stdout: pw})
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(pr, line); err != nil || string(line) != "first\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := p.WriteStdin(ctx, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Errorf("Wait: %+v %v", st, err)
	}
	pw.Close()
	if err := p.Kill(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Kill after exit: %v", err)
	}
	// Cancelling the context ends the stream and the process.
	cctx, cancel := context.WithCancel(ctx)
	p, err = sb.Start(cctx, Cmd{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := p.Wait(); err == nil {
		t.Error("Wait after cancel: no error")
	}
	waitNoProcess(t, sb, p.ID)
}

// waitNoProcess waits until sandboxd no longer lists process id.
func waitNoProcess(t *testing.T, sb *Sandbox, id int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := sb.Processes(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range ps {
			found = found || p.ID == id
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still listed: %+v", id, ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func suiteStdin(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	var out syncBuffer
	big := strings.Repeat("0123456789", 20000) // 200 KB, several stdin chunks
	p, err := sb.Start(ctx, Cmd{Command: "wc -c", Stdin: strings.NewReader(big), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() || strings.TrimSpace(out.String()) != "200000" {
		t.Fatalf("copied stdin: %+v %v %q", st, err, out.String())
	}
	var out2 syncBuffer
	p, err = sb.Start(ctx, Cmd{Command: "cat", Stdout: &out2})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Stdin(ctx)
	for _, s := range []string{"a", "b", "c"} {
		if _, err := io.WriteString(w, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() || out2.String() != "abc" {
		t.Fatalf("stdin writer: %+v %v %q", st, err, out2.String())
	}
	if err := p.WriteStdin(ctx, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

func suiteSignal(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	tests := []struct {
		name string
		sig  string
		act  func(*Process) error
		want int
	}{
		{"TERM", "SIGTERM", nil, 15},
		{"number", "2", nil, 2},
		{"kill", "", func(p *Process) error { return p.Kill(ctx) }, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			p, err := sb.Start(ctx, Cmd{Command: "echo ready; exec sleep 30", Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			for !strings.Contains(out.String(), "ready") {
				time.Sleep(5 * time.Millisecond)
			}
			if tc.act != nil {
				err = tc.act(p)
			} else {
				err = p.Signal(ctx, tc.sig)
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if err != nil || st.Signal != tc.want {
				t.Errorf("exit %+v %v, want signal %d", st, err, tc.want)
			}
		})
	}
	p, err := sb.Start(ctx, Cmd{Command: "sleep 30", PTY: &PTYSize{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Resize(ctx, 120, 40); err != nil {
		t.Errorf("Resize: %v", err)
	}
	if err := p.Signal(ctx, "NOPE"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad signal: %v", err)
	}
	_ = p.Kill(ctx)
	_, _ = p.Wait()
}

func suiteFiles(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	f := sb.Files()
	if err := f.Delete(ctx, "t", true); err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	data := []byte("hello \x00 world")
	if err := f.WriteFile(ctx, "/t/sub/a b%.txt", data, WithMode(0o600)); err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadFile(ctx, "t/sub/a b%.txt")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile %q %v", got, err)
	}
	if err := f.WriteFile(ctx, "t/empty", nil); err != nil {
		t.Fatal(err)
	}
	l, err := f.List(ctx, "t/sub")
	if err != nil || len(l) != 1 || l[0].Name != "a b%.txt" || l[0].Size != int64(len(data)) ||
		l[0].Type != FileTypeFile || l[0].Mode != "0600" || l[0].ModTime.IsZero() {
		t.Fatalf("List: %+v %v", l, err)
	}
	l, err = f.List(ctx, "t")
	if err != nil || len(l) != 2 || l[0].Name != "empty" || l[1].Name != "sub" || !l[1].IsDir() {
		t.Errorf("List t: %+v %v", l, err)
	}
	tests := []struct {
		path string
		want bool
	}{{"t/sub/a b%.txt", true}, {"t/sub", true}, {"t/none", false}, {"/", true}}
	for _, tc := range tests {
		if ok, err := f.Exists(ctx, tc.path); err != nil || ok != tc.want {
			t.Errorf("Exists(%q) = %v, %v", tc.path, ok, err)
		}
	}
	errTests := []struct {
		name string
		do   func() error
		want error
	}{
		{"read missing", func() error { _, err := f.ReadFile(ctx, "t/none"); return err }, ErrNotFound},
		{"read dir", func() error { _, err := f.ReadFile(ctx, "t/sub"); return err }, ErrIsDirectory},
		{"list file", func() error { _, err := f.List(ctx, "t/empty"); return err }, ErrNotDirectory},
		{"dotdot", func() error { _, err := f.ReadFile(ctx, "t/../../etc/passwd"); return err }, ErrInvalidPath},
		{"empty", func() error { return f.WriteFile(ctx, "", nil) }, ErrInvalidPath},
		{"non-empty dir", func() error { return f.Delete(ctx, "t/sub", false) }, ErrConflict},
		{"write over dir", func() error { return f.WriteFile(ctx, "t/sub", []byte("x")) }, ErrInvalidArgument},
	}
	for _, tc := range errTests {
		if err := tc.do(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := f.Delete(ctx, "t/empty", false); err != nil {
		t.Error(err)
	}
	if err := f.Delete(ctx, "t", true); err != nil {
		t.Error(err)
	}
	if ok, _ := f.Exists(ctx, "t"); ok {
		t.Error("t still exists")
	}
	if err := f.Delete(ctx, "t", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete missing: %v", err)
	}
}

func suiteFileStreams(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	f := sb.Files()
	big := bytes.Repeat([]byte("abcdefghij"), 300000) // 3 MB: streamed both ways
	if err := f.Write(ctx, "s/big.bin", struct{ io.Reader }{bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	rc, err := f.Read(ctx, "s/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Read: %d bytes, %v", len(got), err)
	}
	w, err := f.Create(ctx, "s/created.txt", WithMode(0o640))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := io.WriteString(w, "line\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := io.WriteString(w, "late"); err == nil {
		t.Error("Write after Close succeeded")
	}
	bad, err := f.Create(ctx, "s") // a directory: the upload fails
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(bad, "x")
	if err := bad.Close(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Create over a directory: Close = %v", err)
	}
	if b, err := f.ReadFile(ctx, "s/created.txt"); err != nil || string(b) != "line\nline\nline\n" {
		t.Errorf("created file %q %v", b, err)
	}
	// The output of a process into a file, through a pipe.
	pr, pw := io.Pipe()
	p, err := sb.Start(ctx, Cmd{Command: "seq 1 1000", Stdout: pw})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := p.Wait()
		pw.CloseWithError(err)
	}()
	if err := f.Write(ctx, "s/seq.txt", pr); err != nil {
		t.Fatal(err)
	}
	if r, err := sb.Run(ctx, "wc -l < s/seq.txt"); err != nil || strings.TrimSpace(r.Stdout) != "1000" {
		t.Errorf("seq.txt: %+v %v", r, err)
	}
	if err := f.Delete(ctx, "s", true); err != nil {
		t.Error(err)
	}
}
