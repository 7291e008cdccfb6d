package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// TestRetryBackoffContextEnd: a context that ends while a retried request backs off
// ends the call with an error that matches the context's (and still the last answer's).
func TestRetryBackoffContextEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusTooManyRequests, `{"code":"RESOURCE_EXHAUSTED","message":"busy"}`)
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{name: "deadline", want: context.DeadlineExceeded, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 120*time.Millisecond)
		}},
		{name: "cancel", want: context.Canceled, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(120*time.Millisecond, cancel)
			return ctx, cancel
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := sb.Run(ctx, "true")
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v does not match %v", err, tc.want)
			}
			var he *HTTPError
			if !errors.As(err, &he) || he.StatusCode != http.StatusTooManyRequests {
				t.Errorf("error %v does not carry the last answer (429)", err)
			}
		})
	}
}

// scriptStep is one scripted answer of the API server: err, or for a Get obj, for a
// Watch the events after which the server ends the watch.
type scriptStep struct {
	obj    runtime.Object
	events []watch.Event
	err    error
}

// scriptedRes answers Get and Watch from scripts, each call taking the next step; other
// calls are not scripted (they panic). Once the watches are used up, a Watch closes
// exhausted and waits for its context to end.
type scriptedRes[T kobject, L runtime.Object] struct {
	kubeResource[T, L]
	mu             sync.Mutex
	gets, watches  []scriptStep
	exhausted      chan struct{}
	exhaustedClose sync.Once
}

func (r *scriptedRes[T, L]) Get(ctx context.Context, name string, _ metav1.GetOptions) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	if len(r.gets) == 0 {
		return zero, apierrors.NewBadRequest("no more scripted GETs")
	}
	st := r.gets[0]
	r.gets = r.gets[1:]
	if st.err != nil {
		return zero, st.err
	}
	return st.obj.DeepCopyObject().(T), nil
}

func (r *scriptedRes[T, L]) Watch(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	r.mu.Lock()
	if len(r.watches) == 0 {
		r.mu.Unlock()
		r.exhaustedClose.Do(func() { close(r.exhausted) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	st := r.watches[0]
	r.watches = r.watches[1:]
	r.mu.Unlock()
	if st.err != nil {
		return nil, st.err
	}
	ch := make(chan watch.Event, len(st.events))
	for _, ev := range st.events {
		ch <- ev
	}
	close(ch) // the server ends the watch after these
	return endedWatch(ch), nil
}

// endedWatch is a watch whose events are all in its closed channel.
type endedWatch chan watch.Event

func (w endedWatch) Stop()                          {}
func (w endedWatch) ResultChan() <-chan watch.Event { return w }

// scriptedKube serves sandboxes only.
type scriptedKube struct{ sbx sandboxAPI }

func (k scriptedKube) sandboxes(string) sandboxAPI  { return k.sbx }
func (k scriptedKube) claims(string) claimAPI       { return nil }
func (k scriptedKube) templates(string) templateAPI { return nil }

type recordKey struct{}

// recordPauses records the back-off pauses of the loops run with the context it returns
// (instead of sleeping them); pauses of other contexts sleep as before.
func recordPauses(t *testing.T) (context.Context, func() []time.Duration) {
	var mu sync.Mutex
	var got []time.Duration
	ctx := context.WithValue(context.Background(), recordKey{}, t.Name())
	old := pauseFn.Load()
	rec := func(c context.Context, d time.Duration) {
		if c.Value(recordKey{}) != t.Name() {
			if old != nil {
				(*old)(c, d)
			} else {
				sleepCtx(c, d)
			}
			return
		}
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}
	pauseFn.Store(&rec)
	t.Cleanup(func() { pauseFn.Store(old) })
	return ctx, func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), got...)
	}
}

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, n := range v {
		d[i] = time.Duration(n) * time.Millisecond
	}
	return d
}

func repeat(st scriptStep, n int) []scriptStep {
	s := make([]scriptStep, n)
	for i := range s {
		s[i] = st
	}
	return s
}

func steps(parts ...any) []scriptStep {
	var s []scriptStep
	for _, p := range parts {
		switch p := p.(type) {
		case scriptStep:
			s = append(s, p)
		case []scriptStep:
			s = append(s, p...)
		}
	}
	return s
}

// TestWaitBackoffResetsAfterProgress: the waiter's back-off grows over failed GETs and
// WATCHes and watches that end with nothing, and starts again from its minimum once
// the wait makes progress (an object read, an event, a bookmark): a slow phase does not
// leave the rest of the wait at the maximum.
func TestWaitBackoffResetsAfterProgress(t *testing.T) {
	busy := scriptStep{err: apierrors.NewServiceUnavailable("busy")}
	claim := func(rv string, ready bool) *extv1beta1.SandboxClaim {
		c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Namespace: "ns",
			UID: "uid-1", ResourceVersion: rv}}
		if ready {
			c.Status.Sandbox.Name = "sb-1"
			c.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", 1)}
		}
		return c
	}
	get := scriptStep{obj: claim("1", false)}
	pending := scriptStep{events: []watch.Event{{Type: watch.Modified, Object: claim("2", false)}}}
	bookmark := scriptStep{events: []watch.Event{{Type: watch.Bookmark, Object: claim("5", false)}}}
	ready := scriptStep{events: []watch.Event{{Type: watch.Modified, Object: claim("9", true)}}}
	empty := scriptStep{}
	tests := []struct {
		name          string
		gets, watches []scriptStep
		want          []time.Duration
	}{
		{"failed GETs, then events", steps(repeat(busy, 5), get), steps(pending, ready),
			ms(100, 200, 400, 800, 1600, 100)},
		{"failed watches, then events", steps(get), steps(repeat(busy, 4), pending, busy, ready),
			ms(100, 200, 400, 800, 100, 200)},
		{"a bookmark is progress", steps(get), steps(repeat(busy, 3), bookmark, ready),
			ms(100, 200, 400, 100)},
		{"watches that end with nothing back off", steps(get), steps(repeat(empty, 3), ready),
			ms(100, 200, 400)},
		{"up to the maximum", steps(get), steps(repeat(busy, 8), ready),
			ms(100, 200, 400, 800, 1600, 3200, 5000, 5000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, pauses := recordPauses(t)
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			res := &scriptedRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList]{
				gets: tc.gets, watches: tc.watches, exhausted: make(chan struct{})}
			w := &waiter[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList]{api: res, ns: "ns",
				name: "claim-1", what: "claim ns/claim-1 Ready", check: claimReady}
			got, err := w.run(ctx, nil, false)
			if err != nil || got.Status.Sandbox.Name != "sb-1" {
				t.Fatalf("run: %v, %v", got, err)
			}
			if g := pauses(); fmt.Sprint(g) != fmt.Sprint(tc.want) {
				t.Errorf("back-off pauses %v, want %v", g, tc.want)
			}
		})
	}
}

// TestHandoutBackoffResetsAfterProgress: the hand-out stream's back-off (it runs across
// many waits) starts again from its minimum after a watch that showed events.
func TestHandoutBackoffResetsAfterProgress(t *testing.T) {
	busy := scriptStep{err: apierrors.NewServiceUnavailable("busy")}
	sb := func(rv string) *agentsv1beta1.Sandbox {
		return &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb-1", Namespace: "ns",
			ResourceVersion: rv}}
	}
	events := scriptStep{events: []watch.Event{{Type: watch.Added, Object: sb("2")}}}
	bookmark := scriptStep{events: []watch.Event{{Type: watch.Bookmark, Object: sb("3")}}}
	empty := scriptStep{}
	tests := []struct {
		name    string
		watches []scriptStep
		want    []time.Duration
	}{
		{"failed watches, then events", steps(repeat(busy, 5), events, busy), ms(100, 200, 400, 800, 1600, 100)},
		{"watches that end with nothing, then events", steps(empty, empty, events, empty), ms(100, 200, 100)},
		{"a bookmark is progress", steps(empty, empty, bookmark, busy), ms(100, 200, 100)},
		{"up to the maximum", steps(repeat(busy, 8)), ms(100, 200, 400, 800, 1600, 3200, 5000, 5000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, pauses := recordPauses(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			res := &scriptedRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList]{watches: tc.watches,
				exhausted: make(chan struct{})}
			h := &handoutHub{}
			st := &handoutStream{ns: "ns", waiters: map[types.UID][]chan handoutResult{},
				recent: map[types.UID]recentSandbox{}}
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.run(ctx, scriptedKube{sbx: res}, st, 1, "1")
			}()
			select {
			case <-res.exhausted:
			case <-done:
				t.Fatal("the stream ended before its script")
			case <-time.After(5 * time.Second):
				t.Fatal("the script is not used up after 5 s")
			}
			cancel()
			<-done
			if g := pauses(); fmt.Sprint(g) != fmt.Sprint(tc.want) {
				t.Errorf("back-off pauses %v, want %v", g, tc.want)
			}
		})
	}
}
