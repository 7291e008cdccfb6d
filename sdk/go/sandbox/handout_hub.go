package sandbox

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
)

// The hand-out stream: a Client watches the Sandboxes bound to claims (every Sandbox of a
// namespace that carries the claim-UID label) with one watch per namespace, shared by all
// of its hand-out waits there, and hands each bound Sandbox to the wait of its claim. A
// claim created while the stream runs needs no watch of its own (none is set up while the
// controller binds it), and any number of claims at once cost one watch, not one each.
// The stream starts with the first wait (from that claim's resourceVersion) and stops
// when no wait has needed it for handoutStreamIdle.

var (
	// handoutStreamIdle: how long a stream runs on with no wait (a variable for tests).
	handoutStreamIdle = 30 * time.Second
	// handoutRecentFor: how long a bound Ready Sandbox no wait asked for yet is kept for a
	// wait that registers late (its claim's POST answered after the binding was seen).
	handoutRecentFor = 10 * time.Second
)

// handoutRecentMax bounds what a stream keeps for late waits.
const handoutRecentMax = 1024

// handoutHub is a Client's hand-out streams, by namespace.
type handoutHub struct {
	mu      sync.Mutex
	streams map[string]*handoutStream
}

// handoutResult is what a stream hands a wait: the Sandbox, or the error that ended the
// stream (a watch the server refused).
type handoutResult struct {
	sb  *agentsv1beta1.Sandbox
	err error
}

type recentSandbox struct {
	sb   *agentsv1beta1.Sandbox
	seen time.Time
}

// handoutStream is one namespace's stream. All fields are guarded by the hub's mu.
type handoutStream struct {
	ns      string
	waiters map[types.UID][]chan handoutResult // a claim may be waited for twice at once
	recent  map[types.UID]recentSandbox
	cancel  context.CancelFunc // the running watch's; nil when stopped
	gen     int                // counts starts: an idle stop only stops the run it was armed for
	idle    *time.Timer
	// runs: the watch goroutines not ended yet, each by the channel closed when it ends
	// (a stopped run may still be ending when the next one starts)
	runs map[chan struct{}]struct{}
}

// wait waits for the hand-out of the claim with this UID (created at resourceVersion
// rv) in ns: the Sandbox, or the error of a stream the server refused, or ctx's.
func (h *handoutHub) wait(ctx context.Context, k kube, ns string, uid types.UID,
	rv string) (*agentsv1beta1.Sandbox, error) {
	ch := make(chan handoutResult, 1)
	if sb := h.register(k, ns, uid, rv, ch); sb != nil {
		return sb, nil
	}
	defer h.unregister(ns, uid, ch)
	select {
	case r := <-ch:
		return r.sb, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// register adds the wait, starting the stream when it is stopped; a Sandbox the stream
// saw bound to the claim before the wait came is returned at once.
func (h *handoutHub) register(k kube, ns string, uid types.UID, rv string,
	ch chan handoutResult) *agentsv1beta1.Sandbox {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams == nil {
		h.streams = map[string]*handoutStream{}
	}
	st := h.streams[ns]
	if st == nil {
		st = &handoutStream{ns: ns, waiters: map[types.UID][]chan handoutResult{},
			recent: map[types.UID]recentSandbox{}}
		h.streams[ns] = st
	}
	if r, ok := st.recent[uid]; ok && time.Since(r.seen) <= handoutRecentFor {
		return r.sb // kept for another wait of this claim too, until it ages out
	}
	st.waiters[uid] = append(st.waiters[uid], ch)
	if st.idle != nil {
		st.idle.Stop()
		st.idle = nil
	}
	if st.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		st.cancel = cancel
		st.gen++
		done := make(chan struct{})
		if st.runs == nil {
			st.runs = map[chan struct{}]struct{}{}
		}
		st.runs[done] = struct{}{}
		go func(gen int) {
			defer func() {
				h.mu.Lock()
				delete(st.runs, done)
				h.mu.Unlock()
				close(done)
			}()
			h.run(ctx, k, st, gen, rv)
		}(st.gen)
	}
	return nil
}

// unregister removes the wait (unless it was handed its result already); the last one
// arms the stream's idle stop.
func (h *handoutHub) unregister(ns string, uid types.UID, ch chan handoutResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.streams[ns]
	for i, c := range st.waiters[uid] {
		if c == ch {
			st.waiters[uid] = append(st.waiters[uid][:i], st.waiters[uid][i+1:]...)
			break
		}
	}
	if len(st.waiters[uid]) == 0 {
		delete(st.waiters, uid)
	}
	if len(st.waiters) > 0 || st.cancel == nil || st.idle != nil {
		return
	}
	gen := st.gen
	st.idle = time.AfterFunc(handoutStreamIdle, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(st.waiters) == 0 && st.cancel != nil && st.gen == gen {
			st.stopLocked()
		}
	})
}

// stopIdle stops the streams no wait uses.
func (h *handoutHub) stopIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range h.streams {
		if len(st.waiters) == 0 {
			st.stopLocked()
		}
	}
}

// close stops every stream, waits or not, and returns once their goroutines have ended
// (every one: also those of runs stopped before that are still ending). The waits still
// running go on watching their claims (which decide); a later wait starts a stream again.
func (h *handoutHub) close() {
	var running []chan struct{}
	h.mu.Lock()
	for _, st := range h.streams {
		for done := range st.runs {
			running = append(running, done)
		}
		st.stopLocked()
	}
	h.mu.Unlock()
	for _, done := range running { // those running when close began; a later wait's are its own
		<-done
	}
}

func (st *handoutStream) stopLocked() {
	if st.cancel != nil {
		st.cancel()
		st.cancel = nil
	}
	if st.idle != nil {
		st.idle.Stop()
		st.idle = nil
	}
	st.recent = map[types.UID]recentSandbox{}
}

// deliver hands a bound Sandbox to its claim's waits, or keeps it for a wait to come.
func (h *handoutHub) deliver(st *handoutStream, sb *agentsv1beta1.Sandbox) {
	uid := types.UID(sb.Labels[agentsv1beta1.LabelClaimUID])
	if uid == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !handedOut(sb, uid) {
		delete(st.recent, uid) // no longer what a wait may take (being deleted, suspended)
		return
	}
	if chs, ok := st.waiters[uid]; ok {
		delete(st.waiters, uid)
		for _, ch := range chs {
			ch <- handoutResult{sb: sb}
		}
		return
	}
	now := time.Now()
	if len(st.recent) >= handoutRecentMax {
		for u, r := range st.recent {
			if now.Sub(r.seen) > handoutRecentFor {
				delete(st.recent, u)
			}
		}
	}
	if len(st.recent) < handoutRecentMax {
		st.recent[uid] = recentSandbox{sb: sb, seen: now}
	}
}

// forget drops a deleted Sandbox kept for a wait to come: it is no hand-out any more.
func (h *handoutHub) forget(st *handoutStream, sb *agentsv1beta1.Sandbox) {
	uid := types.UID(sb.Labels[agentsv1beta1.LabelClaimUID])
	if uid == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := st.recent[uid]; ok && r.sb.Name == sb.Name {
		delete(st.recent, uid)
	}
}

// fail ends the stream with err: every wait gets it (the claim decides for them), and the
// next wait starts the stream again.
func (h *handoutHub) fail(st *handoutStream, gen int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.gen != gen {
		return
	}
	for uid, chs := range st.waiters {
		delete(st.waiters, uid)
		for _, ch := range chs {
			ch <- handoutResult{err: err}
		}
	}
	st.stopLocked()
}

// run is a stream's watch loop, from resourceVersion rv, until ctx ends (the idle stop)
// or the server refuses the watch.
func (h *handoutHub) run(ctx context.Context, k kube, st *handoutStream, gen int, rv string) {
	var delay backoff
	for ctx.Err() == nil {
		wi, err := k.sandboxes(st.ns).Watch(ctx, metav1.ListOptions{
			LabelSelector: agentsv1beta1.LabelClaimUID, ResourceVersion: rv, AllowWatchBookmarks: true})
		switch {
		case err != nil && (apierrors.IsGone(err) || apierrors.IsResourceExpired(err)):
			rv = "" // from the current state: it holds every binding missed
			continue
		case err != nil && transient(err) && ctx.Err() == nil:
			delay.sleep(ctx)
			continue
		case err != nil:
			if ctx.Err() == nil {
				h.fail(st, gen, err)
			}
			return
		}
		events := h.drain(ctx, st, wi, &rv)
		wi.Stop()
		if events > 0 {
			delay.reset() // progress: the next failure starts from the minimum again
		} else {
			delay.sleep(ctx) // a watch that ends at once must not spin
		}
	}
}

// drain reads one watch until it ends, handing out what it shows; rv follows it ("" after
// a 410 Gone). Returns how many objects it read.
func (h *handoutHub) drain(ctx context.Context, st *handoutStream, wi watch.Interface, rv *string) int {
	events := 0
	for {
		select {
		case <-ctx.Done():
			return events
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return events
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Bookmark:
				sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
				if !ok {
					continue
				}
				events++
				*rv = sb.ResourceVersion
				if ev.Type != watch.Bookmark {
					h.deliver(st, sb)
				}
			case watch.Deleted:
				if sb, ok := ev.Object.(*agentsv1beta1.Sandbox); ok {
					events++
					*rv = sb.ResourceVersion
					h.forget(st, sb)
				}
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					*rv = ""
				}
				return events
			}
		}
	}
}
