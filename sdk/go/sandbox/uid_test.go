package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// strangerUID is the UID of an object another client made again under a name.
const strangerUID = "uid-stranger"

// remake deletes the object name and creates another (another client's) under the same
// name, with strangerUID (mu held).
func remake[T kobject, L runtime.Object](r *fakeRes[T, L], name string) {
	o, ok := r.objs[name]
	if !ok {
		panic("remake of missing " + name)
	}
	o = r.copy(o)
	r.remove(name)
	o.SetUID(strangerUID)
	r.put(o)
}

// remakeLocked is remake for a test (takes mu).
func remakeLocked[T kobject, L runtime.Object](r *fakeRes[T, L], name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	remake(r, name)
}

// uidOf is the UID stored under name, or "" when there is none.
func uidOf[T kobject, L runtime.Object](r *fakeRes[T, L], name string) string {
	if !r.Has(name) {
		return ""
	}
	return string(r.Stored(name).GetUID())
}

// The rollback of a failed create deletes only the object it created: when the name
// holds another client's object by then, that one stays (and the rollback succeeds).
func TestRollbackSparesObjectMadeAgain(t *testing.T) {
	tests := []struct {
		name   string
		claim  bool
		remake bool // the name is taken by another object before the rollback's delete
	}{
		{name: "claim made again", claim: true, remake: true},
		{name: "sandbox made again", remake: true},
		{name: "claim still ours", claim: true},
		{name: "sandbox still ours"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			c := newTestClient(t, k)
			defer c.Close()
			var err error
			if tc.claim {
				k.clm.onCreate = func(r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], cl *extv1beta1.SandboxClaim) {
					setClaimReady("False", "InvalidMetadata", "")(k, r, cl.Name)
				}
				if tc.remake {
					k.clm.beforeDelete = func(r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], name string) {
						remake(r, name)
					}
				}
				_, err = c.CreateSandbox(context.Background(), "pool", WithName("x"))
				if !errors.Is(err, ErrClaimFailed) {
					t.Errorf("CreateSandbox: %v, want ErrClaimFailed", err)
				}
			} else {
				if tc.remake {
					k.sbx.beforeDelete = func(r *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], name string) {
						remake(r, name)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_, err = c.CreateSandboxFromSpec(ctx, agentsv1beta1.SandboxSpec{}, WithName("x"))
				if !errors.Is(err, ErrTimeout) {
					t.Errorf("CreateSandboxFromSpec: %v, want ErrTimeout", err)
				}
			}
			if err != nil && errors.Is(err, ErrConflict) {
				t.Errorf("the rollback's 409 was reported: %v", err)
			}
			got := uidOf(k.sbx, "x")
			if tc.claim {
				got = uidOf(k.clm, "x")
			}
			want := ""
			if tc.remake {
				want = strangerUID
			}
			if got != want {
				t.Errorf("object x after the rollback: UID %q, want %q", got, want)
			}
		})
	}
}

// Sandbox.Delete deletes only the object the handle knows.
func TestHandleDeleteSparesObjectMadeAgain(t *testing.T) {
	tests := []struct {
		name   string
		claim  bool
		attach bool // the handle comes from Attach (not from the create)
		remake bool
	}{
		{name: "claim made again", claim: true, remake: true},
		{name: "sandbox made again", remake: true},
		{name: "attached sandbox made again", attach: true, remake: true},
		{name: "attached sandbox's claim made again", claim: true, attach: true, remake: true},
		{name: "claim", claim: true},
		{name: "sandbox"},
		{name: "attached sandbox", attach: true},
		{name: "attached sandbox's claim", claim: true, attach: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			c := newTestClient(t, k)
			defer c.Close()
			ctx := context.Background()
			var h *Sandbox
			var err error
			if tc.claim {
				h, err = c.CreateSandbox(ctx, "pool", WithName("x"), WithoutWait())
				if err == nil && tc.attach { // a handle of the claim's Sandbox, by Attach
					yes := true
					sb := readySandbox("sb-x", "10.0.0.1")
					sb.OwnerReferences = []metav1.OwnerReference{{Kind: "SandboxClaim", Name: "x",
						UID: k.clm.Stored("x").UID, Controller: &yes}}
					k.sbx.Add(sb)
					if h, err = c.Attach(ctx, "sb-x"); err == nil && h.ClaimName() != "x" {
						t.Fatalf("attached handle's claim %q", h.ClaimName())
					}
				}
			} else {
				h, err = c.CreateSandboxFromSpec(ctx, agentsv1beta1.SandboxSpec{}, WithName("x"), WithoutWait())
				if err == nil && tc.attach {
					h, err = c.Attach(ctx, "x")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.remake && tc.claim {
				remakeLocked(k.clm, "x")
			} else if tc.remake {
				remakeLocked(k.sbx, "x")
			}
			if err := h.Delete(ctx); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, err := h.Run(ctx, "true"); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotReady) {
				t.Errorf("Run after Delete: %v, want ErrClosed", err)
			}
			got := uidOf(k.sbx, "x")
			if tc.claim {
				got = uidOf(k.clm, "x")
			}
			want := ""
			if tc.remake {
				want = strangerUID
			}
			if got != want {
				t.Errorf("object x after Delete: UID %q, want %q", got, want)
			}
		})
	}
}

// A wait that re-reads its object after a 410 Gone and finds another object under the
// name (ours was deleted and the name taken again) ends with ErrSandboxDeleted, not by
// waiting for the other object.
func TestWaitAfterGoneSeesObjectMadeAgain(t *testing.T) {
	for _, claim := range []bool{true, false} {
		name := map[bool]string{true: "claim", false: "sandbox"}[claim]
		t.Run(name, func(t *testing.T) {
			k := newFakeKube()
			c := newTestClient(t, k)
			defer c.Close()
			c.waitClaimReady = true // the claim's own wait (the waiter), not the hand-out
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var err error
			if claim {
				k.clm.onCreate = func(r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], cl *extv1beta1.SandboxClaim) {
					r.goneWatches = 1
					remake(r, cl.Name)
				}
				_, err = c.CreateSandbox(ctx, "pool", WithName("x"), WithKeepOnFailure())
			} else {
				k.sbx.onCreate = func(r *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], sb *agentsv1beta1.Sandbox) {
					r.goneWatches = 1
					remake(r, sb.Name)
				}
				_, err = c.CreateSandboxFromSpec(ctx, agentsv1beta1.SandboxSpec{}, WithName("x"), WithKeepOnFailure())
			}
			if !errors.Is(err, ErrSandboxDeleted) {
				t.Errorf("wait: %v, want ErrSandboxDeleted", err)
			}
		})
	}
}

// A wait for an object of which no version was ever seen ends with ErrNotFound, not
// ErrSandboxDeleted; one for an object the handle knew still says it was deleted.
func TestWaitForMissingObject(t *testing.T) {
	tests := []struct {
		name        string
		run         func(ctx context.Context, c *Client, k *fakeKube) error
		wantDeleted bool
	}{
		{name: "AttachClaim of a claim that never existed", run: func(ctx context.Context, c *Client, k *fakeKube) error {
			_, err := c.AttachClaim(ctx, "nope")
			return err
		}},
		{name: "WaitReady of a deleted claim", wantDeleted: true, run: func(ctx context.Context, c *Client, k *fakeKube) error {
			h, err := c.CreateSandbox(ctx, "pool", WithoutWait())
			if err != nil {
				return err
			}
			k.clm.mu.Lock()
			k.clm.remove(h.ClaimName())
			k.clm.mu.Unlock()
			return h.WaitReady(ctx)
		}},
		{name: "WaitReady of a deleted sandbox", wantDeleted: true, run: func(ctx context.Context, c *Client, k *fakeKube) error {
			h, err := c.CreateSandboxFromSpec(ctx, agentsv1beta1.SandboxSpec{}, WithoutWait())
			if err != nil {
				return err
			}
			k.sbx.mu.Lock()
			k.sbx.remove(h.Name())
			k.sbx.mu.Unlock()
			return h.WaitReady(ctx)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			c := newTestClient(t, k)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := tc.run(ctx, c, k)
			if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrSandboxDeleted) != tc.wantDeleted {
				t.Errorf("error %v: want ErrNotFound, ErrSandboxDeleted %v", err, tc.wantDeleted)
			}
		})
	}
}

// A handle whose Sandbox another client deleted and made again under its name does not
// take the new one at its next read (before, Refresh adopted it: commands ran in the
// other client's Sandbox and Delete removed it). Refresh fails with ErrSandboxDeleted,
// later calls with ErrClosed, and the new object stays.
func TestRefreshRefusesObjectMadeAgain(t *testing.T) {
	k := newFakeKube()
	c := newTestClient(t, k)
	sb := readySandbox("sb", "10.0.0.1")
	sb.UID = "uid-mine"
	k.sbx.Add(sb)
	ctx := context.Background()
	h, err := c.Attach(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	remakeLocked(k.sbx, "sb")
	if err := h.Refresh(ctx); !errors.Is(err, ErrSandboxDeleted) {
		t.Fatalf("Refresh after the name was taken again: %v", err)
	}
	if _, err := h.Run(ctx, "true"); !errors.Is(err, ErrClosed) {
		t.Errorf("Run: %v, want ErrClosed", err)
	}
	if err := h.Delete(ctx); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if got := uidOf(k.sbx, "sb"); got != strangerUID {
		t.Errorf("the other client's Sandbox: uid %q, want %q (kept)", got, strangerUID)
	}
}
