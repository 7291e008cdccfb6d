package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocalBackground: a background process outlives the context and the client that
// started it; a second client (another handle) lists it, replays and follows its output,
// writes stdin, waits, and the exited entry is removed; signals and kills work by id. In
// every connection mode (the router and the pod proxy are forwarding proxies here).
func TestLocalBackground(t *testing.T) {
	for _, mode := range []Mode{ModeDirect, ModeRouter, ModePodProxy} {
		t.Run(string(mode), func(t *testing.T) {
			sb := localSandbox(t, mode)
			backgroundLifecycle(t, sb)
			backgroundSignals(t, sb)
		})
	}
}

func collect(t *testing.T, o *OutputStream) (stdout string, last *OutputEvent) {
	t.Helper()
	var b strings.Builder
	for {
		ev, err := o.Next()
		if errors.Is(err, io.EOF) {
			return b.String(), last
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "stdout" {
			b.Write(ev.Data)
		}
		last = ev
	}
}

func backgroundLifecycle(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	startCtx, cancel := context.WithCancel(ctx)
	p, err := sb.StartBackground(startCtx, Cmd{Command: "echo ready; read x; echo got $x; exit 3"}, KeepStdinOpen())
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the starting call's context ends: the process does not
	sb.c.CloseIdleConnections()
	if p.ID == 0 || p.PID == 0 {
		t.Fatalf("ids %d/%d", p.ID, p.PID)
	}
	list, err := sb.BackgroundProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, i := range list {
		found = found || (i.ID == p.ID && i.Running() && i.ExitCode == nil)
	}
	if !found {
		t.Fatalf("process %d not listed as running: %+v", p.ID, list)
	}
	h := sb.Background(p.ID)
	o, err := h.Output(ctx, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ev, err := o.Next()
	if err != nil || ev.Type != "stdout" || string(ev.Data) != "ready\n" || ev.Offset != 0 {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	if err := h.WriteStdin(ctx, []byte("in\n")); err != nil {
		t.Fatal(err)
	}
	out, last := collect(t, o)
	if out != "got in\n" || last == nil || last.Exit == nil || last.Exit.ExitCode != 3 || last.Offset != 13 {
		t.Fatalf("followed %q, last %+v", out, last)
	}
	info, err := h.Wait(ctx, 10*time.Second)
	if err != nil || info.Running() || info.ExitCode == nil || *info.ExitCode != 3 || info.EndedAt == nil {
		t.Fatalf("wait: %+v, %v", info, err)
	}
	o2, err := h.Output(ctx, false, 6)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := collect(t, o2); out != "got in\n" {
		t.Fatalf("replay from 6: %q", out)
	}
	o2.Close()
	if err := h.WriteStdin(ctx, []byte("late")); !errors.Is(err, ErrProcessExited) {
		t.Fatalf("stdin after exit: %v", err)
	}
	if err := h.Kill(ctx); err != nil {
		t.Fatalf("kill after exit: %v", err)
	}
	if err := h.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Info(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("info after remove: %v", err)
	}
}

func backgroundSignals(t *testing.T, sb *Sandbox) {
	ctx := testCtx(t)
	p, err := sb.StartBackground(ctx, Cmd{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	info, err := p.Wait(ctx, 300*time.Millisecond)
	if err != nil || !info.Running() || time.Since(t0) < 250*time.Millisecond {
		t.Fatalf("wait with timeout: %+v, %v after %v", info, err, time.Since(t0))
	}
	if err := p.Signal(ctx, "TERM"); err != nil {
		t.Fatal(err)
	}
	info, err = p.Wait(ctx, 0)
	if err != nil || info.Running() || info.Signal == nil || *info.Signal != 15 || info.ExitCode != nil {
		t.Fatalf("after SIGTERM: %+v, %v", info, err)
	}
	q, err := sb.StartBackground(ctx, Cmd{Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Remove(ctx); err != nil { // kills, waits and forgets a running one
		t.Fatal(err)
	}
	if err := p.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := sb.BackgroundProcesses(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("left: %+v, %v", list, err)
	}
}

// cuttingProxy forwards to sandboxd like the router, but ends every output stream after
// its first event (a proxy's timeout), and counts the output requests.
func cuttingProxy(t *testing.T, sbdPort int, outputs *atomic.Int32) *httptest.Server {
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", sbdPort))
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/output") {
			rp.ServeHTTP(w, r)
			return
		}
		outputs.Add(1)
		resp, err := http.Get(target.String() + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		line, _ := bufio.NewReader(resp.Body).ReadBytes('\n')
		_, _ = w.Write(line)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLocalBackgroundOutputResumes: an output stream cut before the exit is resumed from
// its offset, so the events arrive once each and in order; a long wait is a series of
// short requests that still ends at the exit.
func TestLocalBackgroundOutputResumes(t *testing.T) {
	port := startSandboxd(t)
	var outputs atomic.Int32
	k := newFakeKube()
	k.sbx.Add(readySandbox("sb", "127.0.0.1"))
	c, err := NewClient(Options{Namespace: "ns", kube: k, Connection: Connection{Mode: ModeRouter, Port: port,
		RouterURL: cuttingProxy(t, port, &outputs).URL, RouterToken: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	sb, err := c.Attach(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	p, err := sb.StartBackground(ctx, Cmd{Command: "for i in 1 2 3; do echo $i; sleep 0.2; done"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := p.Output(ctx, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	out, last := collect(t, o)
	if out != "1\n2\n3\n" || last == nil || last.Exit == nil || last.Exit.ExitCode != 0 {
		t.Fatalf("resumed output %q, last %+v", out, last)
	}
	if n := outputs.Load(); n < 3 {
		t.Fatalf("%d output requests: the stream was not resumed", n)
	}
	info, err := p.Wait(ctx, 0)
	if err != nil || info.Running() {
		t.Fatalf("wait: %+v, %v", info, err)
	}
}
