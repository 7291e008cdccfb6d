package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// fakeRes is an in-memory API resource with resourceVersions, generations and watches
// that replay from a resourceVersion (as the API server's watch cache does).
type fakeRes[T kobject, L runtime.Object] struct {
	mu       sync.Mutex
	gr       schema.GroupResource
	objs     map[string]T
	log      []watch.Event
	rv       *int
	watchers []*fakeWatcher
	newList  func([]T) L
	gen      int
	// hooks run with mu held, after the change is stored.
	onCreate func(r *fakeRes[T, L], obj T)
	onPatch  func(r *fakeRes[T, L], obj T)
	// goneWatches: the next n Watch calls answer with a 410 Error event.
	goneWatches int
	// watchBlock: the next Watch call waits until it is closed (the caller's context
	// notwithstanding), as a request stuck on a slow connection.
	watchBlock chan struct{}
	// watchErr: Watch calls fail with it; getErr: Get calls fail with it.
	watchErr   error
	getErr     error
	watchCalls int
	getCalls   int
	// getErrs: the next Get calls fail with these, in turn (before getErr).
	getErrs []error
	// createErr: Create calls fail with it, storing nothing (the request was not sent).
	createErr   error
	deleteCalls int
	// lostAnswers: the next n Creates store the object, then fail with lostErr (an
	// answer lost after the server stored it).
	lostAnswers int
	lostErr     error
	// lateStore: with lostAnswers, the create stores nothing at once but stores the
	// object after this long (a create still in the server when its answer was lost).
	lateStore time.Duration
	lateDone  chan struct{} // closed once a late store happened
	deleted   []string      // names deleted, in order
	uids      int           // UIDs handed out: each create gets a new one
	// beforeDelete runs (mu held) before a Delete looks at the stored object.
	beforeDelete func(r *fakeRes[T, L], name string)
}

func newFakeRes[T kobject, L runtime.Object](rv *int, gr schema.GroupResource, newList func([]T) L) *fakeRes[T, L] {
	return &fakeRes[T, L]{gr: gr, objs: map[string]T{}, rv: rv, newList: newList}
}

func (r *fakeRes[T, L]) copy(o T) T { return o.DeepCopyObject().(T) }

func (r *fakeRes[T, L]) emit(t watch.EventType, o T) {
	ev := watch.Event{Type: t, Object: r.copy(o)}
	r.log = append(r.log, ev)
	for _, w := range r.watchers {
		w.send(ev)
	}
}

func (r *fakeRes[T, L]) bump(o T) {
	*r.rv++
	o.SetResourceVersion(strconv.Itoa(*r.rv))
}

// put stores o (create or replace) and emits the event; for tests and hooks (mu held).
func (r *fakeRes[T, L]) put(o T) {
	_, existed := r.objs[o.GetName()]
	r.bump(o)
	r.objs[o.GetName()] = r.copy(o)
	if existed {
		r.emit(watch.Modified, o)
	} else {
		r.emit(watch.Added, o)
	}
}

// update mutates the stored object (mu held).
func (r *fakeRes[T, L]) update(name string, f func(T)) {
	o, ok := r.objs[name]
	if !ok {
		panic("update of missing " + name)
	}
	o = r.copy(o)
	f(o)
	r.put(o)
}

// remove deletes the object (mu held).
func (r *fakeRes[T, L]) remove(name string) {
	o, ok := r.objs[name]
	if !ok {
		return
	}
	delete(r.objs, name)
	r.bump(o)
	r.emit(watch.Deleted, o)
}

func (r *fakeRes[T, L]) Add(o T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.put(o)
}

func (r *fakeRes[T, L]) Has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.objs[name]
	return ok
}

func (r *fakeRes[T, L]) Stored(name string) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copy(r.objs[name])
}

func (r *fakeRes[T, L]) Get(ctx context.Context, name string, _ metav1.GetOptions) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.getCalls++
	var zero T
	if len(r.getErrs) > 0 {
		err := r.getErrs[0]
		r.getErrs = r.getErrs[1:]
		return zero, err
	}
	if r.getErr != nil {
		return zero, r.getErr
	}
	o, ok := r.objs[name]
	if !ok {
		return zero, apierrors.NewNotFound(r.gr, name)
	}
	return r.copy(o), nil
}

func (r *fakeRes[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var items []T
	for _, o := range r.objs {
		if matchLabels(o.GetLabels(), opts.LabelSelector) {
			items = append(items, r.copy(o))
		}
	}
	return r.newList(items), nil
}

func matchLabels(l map[string]string, sel string) bool {
	if sel == "" {
		return true
	}
	for _, term := range strings.Split(sel, ",") {
		k, v, _ := strings.Cut(term, "=")
		if l[k] != v {
			return false
		}
	}
	return true
}

func (r *fakeRes[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	r.mu.Lock()
	r.watchCalls++
	block := r.watchBlock
	r.watchBlock = nil
	r.mu.Unlock()
	if block != nil {
		<-block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchErr != nil {
		return nil, r.watchErr
	}
	w := &fakeWatcher{ch: make(chan watch.Event, 1000), r: func(w *fakeWatcher) { r.drop(w) }}
	w.name = strings.TrimPrefix(opts.FieldSelector, "metadata.name=")
	if r.goneWatches > 0 {
		r.goneWatches--
		st := apierrors.NewResourceExpired("too old resource version").Status()
		st.Code = 410
		st.Reason = metav1.StatusReasonGone
		w.ch <- watch.Event{Type: watch.Error, Object: &st}
		close(w.ch)
		w.stopped = true
		return w, nil
	}
	from, _ := strconv.Atoi(opts.ResourceVersion)
	for _, ev := range r.log {
		m := ev.Object.(metav1.Object)
		if n, _ := strconv.Atoi(m.GetResourceVersion()); n > from {
			w.send(ev)
		}
	}
	r.watchers = append(r.watchers, w)
	return w, nil
}

func (r *fakeRes[T, L]) drop(w *fakeWatcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.watchers {
		if x == w {
			r.watchers = append(r.watchers[:i], r.watchers[i+1:]...)
			return
		}
	}
}

func (r *fakeRes[T, L]) Create(ctx context.Context, o T, _ metav1.CreateOptions) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	if r.createErr != nil {
		return zero, r.createErr
	}
	o = r.copy(o)
	if o.GetName() == "" {
		r.gen++
		o.SetName(fmt.Sprintf("%s%05d", o.GetGenerateName(), r.gen))
	}
	if _, ok := r.objs[o.GetName()]; ok {
		return zero, apierrors.NewAlreadyExists(r.gr, o.GetName())
	}
	if r.lateStore > 0 && r.lostAnswers > 0 {
		r.lostAnswers--
		late := r.copy(o)
		time.AfterFunc(r.lateStore, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			late.SetGeneration(1)
			r.uids++
			late.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", late.GetName(), r.uids)))
			r.put(late)
			if r.lateDone != nil {
				close(r.lateDone)
			}
		})
		return zero, r.lostErr
	}
	o.SetGeneration(1)
	r.uids++
	o.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", o.GetName(), r.uids)))
	r.put(o)
	out := r.copy(o)
	if r.onCreate != nil {
		r.onCreate(r, r.copy(o))
	}
	if r.lostAnswers > 0 {
		r.lostAnswers--
		return zero, r.lostErr
	}
	return out, nil
}

func (r *fakeRes[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte,
	_ metav1.PatchOptions, _ ...string) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	o, ok := r.objs[name]
	if !ok {
		return zero, apierrors.NewNotFound(r.gr, name)
	}
	if pt != types.MergePatchType {
		return zero, apierrors.NewBadRequest("fake supports merge patches only")
	}
	cur, _ := json.Marshal(o)
	var doc, patch map[string]any
	_ = json.Unmarshal(cur, &doc)
	if err := json.Unmarshal(data, &patch); err != nil {
		return zero, apierrors.NewBadRequest(err.Error())
	}
	oldSpec, _ := json.Marshal(doc["spec"])
	mergeInto(doc, patch)
	newSpec, _ := json.Marshal(doc["spec"])
	b, _ := json.Marshal(doc)
	// A fresh object: unmarshalling into the old one would merge maps (a null
	// annotation would survive).
	n := reflect.New(reflect.TypeOf(o).Elem()).Interface().(T)
	if err := json.Unmarshal(b, n); err != nil {
		return zero, apierrors.NewBadRequest(err.Error())
	}
	if string(oldSpec) != string(newSpec) {
		n.SetGeneration(o.GetGeneration() + 1)
	}
	r.put(n)
	out := r.copy(n)
	if r.onPatch != nil {
		r.onPatch(r, r.copy(n))
	}
	return out, nil
}

func mergeInto(doc, patch map[string]any) {
	for k, v := range patch {
		if v == nil {
			delete(doc, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			dm, ok := doc[k].(map[string]any)
			if !ok {
				dm = map[string]any{}
				doc[k] = dm
			}
			mergeInto(dm, pm)
			continue
		}
		doc[k] = v
	}
}

func (r *fakeRes[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleteCalls++
	if r.beforeDelete != nil {
		r.beforeDelete(r, name)
	}
	o, ok := r.objs[name]
	if !ok {
		return apierrors.NewNotFound(r.gr, name)
	}
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != o.GetUID() {
		// as the API server: 409 Conflict, the precondition failed
		return apierrors.NewConflict(r.gr, name, fmt.Errorf(
			"Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, o.GetUID()))
	}
	r.deleted = append(r.deleted, name)
	r.remove(name)
	return nil
}

type fakeWatcher struct {
	mu      sync.Mutex
	ch      chan watch.Event
	name    string
	stopped bool
	r       func(*fakeWatcher)
}

func (w *fakeWatcher) send(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if m, ok := ev.Object.(metav1.Object); ok && w.name != "" && m.GetName() != w.name {
		return
	}
	select {
	case w.ch <- ev:
	default:
		panic("fake watch buffer full")
	}
}

func (w *fakeWatcher) ResultChan() <-chan watch.Event { return w.ch }

func (w *fakeWatcher) Stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.ch)
	}
	w.mu.Unlock()
	w.r(w)
}

// fakeKube implements kube over fakeRes, one resource per kind for all namespaces.
type fakeKube struct {
	sbx *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList]
	clm *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList]
	tpl *fakeRes[*extv1beta1.SandboxTemplate, *extv1beta1.SandboxTemplateList]
}

func newFakeKube() *fakeKube {
	k := &fakeKube{}
	k.sbx = newFakeRes(new(int), agentsv1beta1.Resource("sandboxes"),
		func(items []*agentsv1beta1.Sandbox) *agentsv1beta1.SandboxList {
			l := &agentsv1beta1.SandboxList{}
			for _, i := range items {
				l.Items = append(l.Items, *i)
			}
			return l
		})
	k.clm = newFakeRes(new(int), extv1beta1.Resource("sandboxclaims"),
		func(items []*extv1beta1.SandboxClaim) *extv1beta1.SandboxClaimList {
			l := &extv1beta1.SandboxClaimList{}
			for _, i := range items {
				l.Items = append(l.Items, *i)
			}
			return l
		})
	k.tpl = newFakeRes(new(int), extv1beta1.Resource("sandboxtemplates"),
		func(items []*extv1beta1.SandboxTemplate) *extv1beta1.SandboxTemplateList {
			l := &extv1beta1.SandboxTemplateList{}
			for _, i := range items {
				l.Items = append(l.Items, *i)
			}
			return l
		})
	// Each resource has its own resourceVersion counter and lock; claim hooks may add
	// Sandboxes (lock order: claims, then sandboxes).
	return k
}

func (k *fakeKube) sandboxes(string) sandboxAPI  { return k.sbx }
func (k *fakeKube) claims(string) claimAPI       { return k.clm }
func (k *fakeKube) templates(string) templateAPI { return k.tpl }
