package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
)

// boundTo is a Ready Sandbox bound to the claim with this UID.
func boundTo(name string, uid types.UID) *agentsv1beta1.Sandbox {
	yes := true
	sb := readySandbox(name, "10.0.0.7")
	sb.Labels = map[string]string{agentsv1beta1.LabelClaimUID: string(uid)}
	sb.OwnerReferences = []metav1.OwnerReference{{Kind: "SandboxClaim", Name: "c", UID: uid, Controller: &yes}}
	return sb
}

// hubState reads a stream's state under the hub's lock.
func hubState(h *handoutHub, ns string) (running bool, gen, waiters, recent int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.streams[ns]
	if st == nil {
		return false, 0, 0, 0
	}
	return st.cancel != nil, st.gen, len(st.waiters), len(st.recent)
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

type waitResult struct {
	sb  *agentsv1beta1.Sandbox
	err error
}

func goWait(h *handoutHub, k kube, uid types.UID) chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		sb, err := h.wait(context.Background(), k, "ns", uid, "0")
		ch <- waitResult{sb, err}
	}()
	return ch
}

func got(t *testing.T, ch chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end")
		return waitResult{}
	}
}

// TestHandoutStreamShared: one watch serves every wait, each gets its own claim's
// Sandbox, whatever else the stream shows; a binding seen before its wait came is kept
// for it.
func TestHandoutStreamShared(t *testing.T) {
	k := newFakeKube()
	h := &handoutHub{}
	waits := map[types.UID]chan waitResult{}
	for i := 0; i < 5; i++ {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		waits[uid] = goWait(h, k, uid)
	}
	eventually(t, "5 waits", func() bool { _, _, n, _ := hubState(h, "ns"); return n == 5 })
	// not handed out: another claim's, not Ready, not controlled by the claim
	k.sbx.Add(boundTo("stranger", "uid-other"))
	unready := boundTo("unready", "uid-0")
	unready.Status.PodIPs = nil
	k.sbx.Add(unready)
	notOwned := boundTo("not-owned", "uid-1")
	notOwned.OwnerReferences[0].UID = "uid-x"
	k.sbx.Add(notOwned)
	for i := 4; i >= 0; i-- {
		k.sbx.Add(boundTo(fmt.Sprintf("sb-%d", i), types.UID(fmt.Sprintf("uid-%d", i))))
	}
	for uid, ch := range waits {
		r := got(t, ch)
		if r.err != nil || r.sb.Labels[agentsv1beta1.LabelClaimUID] != string(uid) || r.sb.Name != "sb-"+string(uid)[4:] {
			t.Errorf("wait %s: %v %v", uid, r.sb, r.err)
		}
	}
	// a binding before its wait (the POST's answer came late): kept, handed out at once
	eventually(t, "the stranger kept", func() bool { _, _, _, n := hubState(h, "ns"); return n >= 1 })
	k.sbx.Add(boundTo("sb-late", "uid-late"))
	eventually(t, "the late binding kept", func() bool { _, _, _, n := hubState(h, "ns"); return n >= 2 })
	r := got(t, goWait(h, k, "uid-late"))
	if r.err != nil || r.sb.Name != "sb-late" {
		t.Fatalf("late wait: %v %v", r.sb, r.err)
	}
	if running, gen, _, _ := hubState(h, "ns"); !running || gen != 1 || k.sbx.watchCalls != 1 {
		t.Fatalf("running %v, started %d times, %d watches: want one stream", running, gen, k.sbx.watchCalls)
	}
}

// TestHandoutStreamIdleStop: the stream stops once no wait needed it for
// handoutStreamIdle, and the next wait starts it again.
func TestHandoutStreamIdleStop(t *testing.T) {
	old := handoutStreamIdle
	handoutStreamIdle = 50 * time.Millisecond
	defer func() { handoutStreamIdle = old }()
	k := newFakeKube()
	h := &handoutHub{}
	ch := goWait(h, k, "uid-a")
	eventually(t, "the wait", func() bool { _, _, n, _ := hubState(h, "ns"); return n == 1 })
	k.sbx.Add(boundTo("sb-a", "uid-a"))
	if r := got(t, ch); r.err != nil || r.sb.Name != "sb-a" {
		t.Fatalf("wait: %v %v", r.sb, r.err)
	}
	eventually(t, "the idle stop", func() bool { running, _, _, _ := hubState(h, "ns"); return !running })
	eventually(t, "the watch ended", func() bool { k.sbx.mu.Lock(); defer k.sbx.mu.Unlock(); return len(k.sbx.watchers) == 0 })
	ch = goWait(h, k, "uid-b")
	eventually(t, "the restart", func() bool { running, gen, _, _ := hubState(h, "ns"); return running && gen == 2 })
	k.sbx.Add(boundTo("sb-b", "uid-b"))
	if r := got(t, ch); r.err != nil || r.sb.Name != "sb-b" {
		t.Fatalf("wait after the restart: %v %v", r.sb, r.err)
	}
	// a wait that ends by its context also counts: the stream stops after it
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.wait(ctx, k, "ns", "uid-c", "0"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with a short context: %v", err)
	}
	eventually(t, "the idle stop after a cancelled wait", func() bool {
		running, _, n, _ := hubState(h, "ns")
		return !running && n == 0
	})
}

// TestHandoutStreamRefused: a watch the server refuses ends every wait with its error
// (their claims decide), and the next wait tries again.
func TestHandoutStreamRefused(t *testing.T) {
	k := newFakeKube()
	k.sbx.watchErr = apierrors.NewForbidden(agentsv1beta1.Resource("sandboxes"), "", errors.New("no watch"))
	h := &handoutHub{}
	var wg sync.WaitGroup
	for _, uid := range []types.UID{"uid-a", "uid-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.wait(context.Background(), k, "ns", uid, "0"); !apierrors.IsForbidden(err) {
				t.Errorf("wait %s: %v, want the refusal", uid, err)
			}
		}()
	}
	wg.Wait()
	if running, _, n, _ := hubState(h, "ns"); running || n != 0 {
		t.Fatalf("running %v with %d waits after the refusal", running, n)
	}
	k.sbx.mu.Lock()
	k.sbx.watchErr = nil
	k.sbx.mu.Unlock()
	ch := goWait(h, k, "uid-c")
	eventually(t, "the wait", func() bool { running, _, n, _ := hubState(h, "ns"); return running && n == 1 })
	k.sbx.Add(boundTo("sb-c", "uid-c"))
	if r := got(t, ch); r.err != nil || r.sb.Name != "sb-c" {
		t.Fatalf("wait after the refusal: %v %v", r.sb, r.err)
	}
}

// TestHandoutStreamSameClaimTwice: two waits for one claim at once both get its Sandbox,
// and a third that comes later gets it from what the stream kept.
func TestHandoutStreamSameClaimTwice(t *testing.T) {
	k := newFakeKube()
	h := &handoutHub{}
	first, second := goWait(h, k, "uid-a"), goWait(h, k, "uid-a")
	eventually(t, "both waits", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.streams["ns"] != nil && len(h.streams["ns"].waiters["uid-a"]) == 2
	})
	k.sbx.Add(boundTo("sb-a", "uid-a"))
	for _, ch := range []chan waitResult{first, second} {
		if r := got(t, ch); r.err != nil || r.sb.Name != "sb-a" {
			t.Fatalf("wait: %v %v", r.sb, r.err)
		}
	}
	k.sbx.Add(boundTo("sb-b", "uid-b"))
	eventually(t, "the binding kept", func() bool { _, _, _, n := hubState(h, "ns"); return n == 1 })
	for i := 0; i < 2; i++ {
		if r := got(t, goWait(h, k, "uid-b")); r.err != nil || r.sb.Name != "sb-b" {
			t.Fatalf("wait %d for a kept binding: %v %v", i, r.sb, r.err)
		}
	}
	// a kept binding that is no longer a hand-out (its Sandbox being deleted) is dropped
	gone := boundTo("sb-b", "uid-b")
	now := metav1.Now()
	gone.DeletionTimestamp = &now
	k.sbx.Add(gone)
	eventually(t, "the kept binding dropped", func() bool { _, _, _, n := hubState(h, "ns"); return n == 0 })
	if _, _, n, _ := hubState(h, "ns"); n != 0 {
		t.Fatalf("%d waits left", n)
	}
}

// TestHandoutHubClose: close stops a stream a wait still uses and returns only after its
// goroutine ended (the fake's watch is gone); the wait goes on, and a later one starts
// the stream again.
func TestHandoutHubClose(t *testing.T) {
	k := newFakeKube()
	h := &handoutHub{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.wait(ctx, k, "ns", "uid-a", "0")
		done <- err
	}()
	eventually(t, "the stream", func() bool { running, _, n, _ := hubState(h, "ns"); return running && n == 1 })
	eventually(t, "its watch", func() bool { k.sbx.mu.Lock(); defer k.sbx.mu.Unlock(); return len(k.sbx.watchers) == 1 })
	h.close()
	if running, _, _, _ := hubState(h, "ns"); running {
		t.Fatal("a stream still runs after close")
	}
	k.sbx.mu.Lock()
	left := len(k.sbx.watchers)
	k.sbx.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d watches still open when close returned: its goroutine was not waited for", left)
	}
	select {
	case err := <-done:
		t.Fatalf("the wait ended with the stream: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	ch := goWait(h, k, "uid-b")
	eventually(t, "the restart", func() bool { running, gen, _, _ := hubState(h, "ns"); return running && gen == 2 })
	k.sbx.Add(boundTo("sb-b", "uid-b"))
	if r := got(t, ch); r.err != nil || r.sb.Name != "sb-b" {
		t.Fatalf("wait after close: %v %v", r.sb, r.err)
	}
	h.close()
}

// TestHandoutDeletedNotHandedOut: a bound Ready Sandbox kept for a wait to come is
// dropped when the stream shows it deleted (with no update before: a delete without a
// graceful phase), so a late wait is not handed a Sandbox that is gone.
func TestHandoutDeletedNotHandedOut(t *testing.T) {
	tests := []struct {
		name     string
		deleted  string // the Sandbox deleted ("": none)
		wantKept bool   // sb-a is still kept afterwards
	}{
		{name: "deleted", deleted: "sb-a"},
		{name: "another deleted", deleted: "sb-other", wantKept: true},
		{name: "none deleted", wantKept: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			h := &handoutHub{}
			defer h.close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// a wait of another claim keeps the stream running
			go func() { _, _ = h.wait(ctx, k, "ns", "uid-z", "0") }()
			eventually(t, "the stream", func() bool { running, _, n, _ := hubState(h, "ns"); return running && n == 1 })
			k.sbx.Add(boundTo("sb-a", "uid-a"))
			k.sbx.Add(boundTo("sb-other", "uid-b"))
			eventually(t, "the bindings kept", func() bool { _, _, _, n := hubState(h, "ns"); return n == 2 })
			if tc.deleted != "" {
				k.sbx.mu.Lock()
				k.sbx.remove(tc.deleted)
				k.sbx.mu.Unlock()
			}
			k.sbx.Add(boundTo("sb-marker", "uid-m")) // the stream has read past the delete once this is kept
			eventually(t, "the marker kept", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				_, ok := h.streams["ns"].recent["uid-m"]
				return ok
			})
			h.mu.Lock()
			_, kept := h.streams["ns"].recent["uid-a"]
			h.mu.Unlock()
			if kept != tc.wantKept {
				t.Fatalf("sb-a kept = %v after deleting %q", kept, tc.deleted)
			}
			if !tc.wantKept {
				wctx, wcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer wcancel()
				if sb, err := h.wait(wctx, k, "ns", "uid-a", "0"); err == nil {
					t.Fatalf("the deleted Sandbox was handed out: %s", sb.Name)
				}
			}
		})
	}
}

// TestHandoutHubCloseWaitsForEveryRun: close waits for the goroutine of a stopped run
// still ending (its watch request stuck) as well as for the running one.
func TestHandoutHubCloseWaitsForEveryRun(t *testing.T) {
	k := newFakeKube()
	stuck := make(chan struct{})
	k.sbx.watchBlock = stuck
	h := &handoutHub{}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = h.wait(ctx, k, "ns", "uid-a", "0")
	}()
	eventually(t, "the first run's watch", func() bool {
		k.sbx.mu.Lock()
		defer k.sbx.mu.Unlock()
		return k.sbx.watchCalls == 1
	})
	cancel()
	<-ended
	h.stopIdle() // the first run is stopped, its goroutine still in its watch request
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	go func() { _, _ = h.wait(bctx, k, "ns", "uid-b", "0") }()
	eventually(t, "the second run's watch", func() bool {
		k.sbx.mu.Lock()
		defer k.sbx.mu.Unlock()
		return len(k.sbx.watchers) == 1
	})
	closed := make(chan struct{})
	go func() {
		h.close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Error("close returned while the first run's goroutine was still running")
	case <-time.After(200 * time.Millisecond):
	}
	close(stuck)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return")
	}
	k.sbx.mu.Lock()
	calls, left := k.sbx.watchCalls, len(k.sbx.watchers)
	k.sbx.mu.Unlock()
	if left != 0 || calls != 2 {
		t.Errorf("%d watches open and %d made after close, want 0 and 2", left, calls)
	}
}
