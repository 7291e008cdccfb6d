package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// Sandbox is a handle to one sandbox: its identity, lifecycle (suspend, resume,
// delete), processes and files. It is safe for concurrent use. Deleting through the
// handle ends it; other handles to the same sandbox see ErrNotFound from the server.
type Sandbox struct {
	c     *Client
	ns    string
	claim string // "" when the Sandbox is not claim-backed

	mu       sync.RWMutex
	claimUID types.UID // the claim's UID, once known (its create's answer, or a wait's read)
	name     string
	obj      *agentsv1beta1.Sandbox // last version read
	readAt   time.Time              // when obj was read
	deleted  bool

	wakeMu ctxMutex // one resume on traffic at a time (idle.go)
}

// Name is the Sandbox's name ("" until a claim created WithoutWait is bound).
func (s *Sandbox) Name() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.name
}

// Namespace is the sandbox's namespace.
func (s *Sandbox) Namespace() string { return s.ns }

// ClaimName is the SandboxClaim that owns the sandbox, or "" for a Sandbox created
// directly.
func (s *Sandbox) ClaimName() string { return s.claim }

// Object returns a copy of the last version of the Sandbox object read (nil before
// the claim is bound).
func (s *Sandbox) Object() *agentsv1beta1.Sandbox {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.obj.DeepCopy()
}

// PodName is the name of the sandbox's Pod.
func (s *Sandbox) PodName() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.obj == nil {
		return s.name
	}
	return s.obj.PodName()
}

// PodIP is the pod's IP (IPv4 preferred), or "" when it has none.
func (s *Sandbox) PodIP() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.obj == nil {
		return ""
	}
	return pickIP(s.obj.Status.PodIPs)
}

// IsReady reports whether the last version read was Ready.
func (s *Sandbox) IsReady() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.obj != nil && s.obj.IsReady()
}

// pickIP prefers the first valid IPv4 address (IPv4-mapped IPv6 counts as IPv4), else
// the first valid IPv6 address.
func pickIP(ips []string) string {
	var v6 string
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			return v4.String()
		}
		if v6 == "" {
			v6 = ip.String()
		}
	}
	return v6
}

func (s *Sandbox) set(obj *agentsv1beta1.Sandbox) {
	s.mu.Lock()
	s.obj = obj
	s.name = obj.Name
	s.readAt = time.Now()
	s.mu.Unlock()
}

// target is the request target; errors when the handle is unusable.
func (s *Sandbox) target() (target, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.deleted {
		return target{}, fmt.Errorf("%w: sandbox %s/%s was deleted", ErrClosed, s.ns, s.name)
	}
	if s.name == "" {
		return target{}, fmt.Errorf("%w: claim %s/%s is not bound yet (call WaitReady)", ErrNotReady, s.ns, s.claim)
	}
	t := target{ns: s.ns, name: s.name, podName: s.name}
	if s.obj != nil {
		t.podName = s.obj.PodName()
		t.podIP = pickIP(s.obj.Status.PodIPs)
	}
	return t, nil
}

// Refresh reads the Sandbox object again (pod IP and name may change after a resume). A
// Sandbox made again under the name (another UID than the handle's) is not taken: the
// handle is then closed and Refresh fails with ErrSandboxDeleted.
func (s *Sandbox) Refresh(ctx context.Context) error {
	name := s.Name()
	if name == "" {
		return fmt.Errorf("%w: claim %s/%s is not bound yet", ErrNotReady, s.ns, s.claim)
	}
	known := s.sandboxUID(name)
	obj, err := s.c.kube.sandboxes(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("sandbox: get %s/%s: %w", s.ns, name, kubeErr(err))
	}
	if known != "" && obj.UID != known {
		// Another client deleted the handle's Sandbox and made one under its name: that
		// one is not the handle's to run commands in, patch or delete.
		s.mu.Lock()
		s.deleted = true
		s.mu.Unlock()
		return fmt.Errorf("%w: sandbox %s/%s (uid %s) was replaced by another object of that name (uid %s)",
			ErrSandboxDeleted, s.ns, name, known, obj.UID)
	}
	s.set(obj)
	return nil
}

// getSandbox reads Sandbox name, again after a transient failure (a "later" answer, a
// lost connection) within ctx, as a wait's reads are: one 500 here failed the wait of a
// claim that was bound and Ready, and CreateSandbox then deleted it.
func (s *Sandbox) getSandbox(ctx context.Context, name string) (*agentsv1beta1.Sandbox, error) {
	var b backoff
	for {
		obj, err := s.c.kube.sandboxes(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil || !transient(err) || rateLimited(err) || ctx.Err() != nil {
			return obj, err
		}
		b.sleep(ctx)
	}
}

// WaitReady waits by watch until the sandbox is Ready (for a claim: bound and Ready),
// bounded by the context or, without a deadline, the client's ReadyTimeout.
func (s *Sandbox) WaitReady(ctx context.Context) error {
	if s.Name() == "" && s.claim != "" {
		return s.waitClaim(ctx, nil, false)
	}
	return s.waitSandbox(ctx, nil, false, 0)
}

// waitClaim waits for the claim to be bound and Ready, then reads its Sandbox. With the
// claim as created (haveStart) it also watches for the early hand-out (handout.go)
// unless Options.WaitForClaimReady is set.
func (s *Sandbox) waitClaim(ctx context.Context, start *extv1beta1.SandboxClaim, haveStart bool) error {
	if haveStart && !s.c.waitClaimReady && handoutUID(start) != "" {
		return s.waitClaimOrHandout(ctx, start)
	}
	ctx, cancel := s.c.withReadyTimeout(ctx)
	defer cancel()
	return s.waitClaimIn(ctx, start, haveStart, false)
}

// waitClaimIn is waitClaim within ctx's own bound. With suspended (AttachClaim), a claim
// bound to a suspended Sandbox ends the wait as well: the handle takes that Sandbox.
func (s *Sandbox) waitClaimIn(ctx context.Context, start *extv1beta1.SandboxClaim, haveStart, suspended bool) error {
	check := claimReady
	if suspended {
		check = claimAttachable
	}
	s.mu.RLock()
	uid := s.claimUID
	s.mu.RUnlock()
	w := &waiter[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList]{
		api: s.c.kube.claims(s.ns), ns: s.ns, name: s.claim,
		what: fmt.Sprintf("claim %s/%s Ready", s.ns, s.claim), check: check, uid: uid,
	}
	claim, err := w.run(ctx, start, haveStart)
	if err != nil {
		return err
	}
	if uid == "" {
		s.mu.Lock()
		s.claimUID = claim.UID
		s.mu.Unlock()
	}
	name := claim.Status.Sandbox.Name
	obj, err := s.getSandbox(ctx, name)
	if err != nil {
		return fmt.Errorf("sandbox: get %s/%s of claim %s: %w", s.ns, name, s.claim, kubeErr(err))
	}
	if suspended && obj.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
		s.set(obj)
		return nil
	}
	if !obj.IsReady() {
		// The claim mirrors the Sandbox; wait for this copy to agree.
		return s.waitSandboxNamed(ctx, name, obj, true, 0)
	}
	s.set(obj)
	return nil
}

func (s *Sandbox) waitSandbox(ctx context.Context, start *agentsv1beta1.Sandbox, haveStart bool, minGen int64) error {
	ctx, cancel := s.c.withReadyTimeout(ctx)
	defer cancel()
	return s.waitSandboxNamed(ctx, s.Name(), start, haveStart, minGen)
}

func (s *Sandbox) waitSandboxNamed(ctx context.Context, name string, start *agentsv1beta1.Sandbox, haveStart bool, minGen int64) error {
	w := &waiter[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList]{
		api: s.c.kube.sandboxes(s.ns), ns: s.ns, name: name,
		what: fmt.Sprintf("sandbox %s/%s Ready", s.ns, name), check: sandboxReady(minGen), uid: s.sandboxUID(name),
	}
	obj, err := w.run(ctx, start, haveStart)
	if err != nil {
		return err
	}
	s.set(obj)
	return nil
}

// setMode patches spec.operatingMode and returns the new generation.
func (s *Sandbox) setMode(ctx context.Context, mode agentsv1beta1.OperatingMode) (*agentsv1beta1.Sandbox, error) {
	if _, err := s.target(); err != nil {
		return nil, err
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"operatingMode": mode}})
	obj, err := s.c.kube.sandboxes(s.ns).Patch(ctx, s.Name(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("sandbox: set %s/%s to %s: %w", s.ns, s.Name(), mode, kubeErr(err))
	}
	s.set(obj)
	return obj, nil
}

// Suspend sets the Sandbox's operatingMode to Suspended (its Pod is deleted; volumes
// and Service stay) and waits until the Suspended condition is True.
func (s *Sandbox) Suspend(ctx context.Context) error {
	obj, err := s.setMode(ctx, agentsv1beta1.OperatingModeSuspended)
	if err != nil {
		return err
	}
	ctx, cancel := s.c.withReadyTimeout(ctx)
	defer cancel()
	w := &waiter[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList]{
		api: s.c.kube.sandboxes(s.ns), ns: s.ns, name: obj.Name,
		what: fmt.Sprintf("sandbox %s/%s Suspended", s.ns, obj.Name), check: sandboxSuspended(obj.Generation),
		uid: obj.UID,
	}
	got, err := w.run(ctx, obj, true)
	if err != nil {
		return err
	}
	s.set(got)
	return nil
}

// Resume sets operatingMode back to Running and waits until the new Pod is Ready. The
// pod IP usually changes; the handle follows it.
func (s *Sandbox) Resume(ctx context.Context) error {
	obj, err := s.setMode(ctx, agentsv1beta1.OperatingModeRunning)
	if err != nil {
		return err
	}
	return s.waitSandbox(ctx, obj, true, obj.Generation)
}

// sandboxUID is the UID of the Sandbox name as last read by the handle, or "" when the
// handle has read no version of it.
func (s *Sandbox) sandboxUID(name string) types.UID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.obj == nil || s.obj.Name != name {
		return ""
	}
	return s.obj.UID
}

// Delete deletes the claim (claim-backed sandboxes) or the Sandbox. Deleting what is
// already gone succeeds; later calls on the handle fail with ErrClosed. Only the object
// the handle knows is deleted (a precondition on its UID, when the handle knows it): an
// object made again under the same name, by another client, is left alone (the handle's
// is then gone already, which succeeds).
func (s *Sandbox) Delete(ctx context.Context) error {
	var err error
	if s.claim != "" {
		s.mu.RLock()
		uid := s.claimUID
		s.mu.RUnlock()
		err = s.c.deleteClaimUID(ctx, s.claim, uid)
	} else {
		name := s.Name()
		err = s.c.deleteSandboxUID(ctx, name, s.sandboxUID(name))
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.deleted = true
	s.mu.Unlock()
	return nil
}
