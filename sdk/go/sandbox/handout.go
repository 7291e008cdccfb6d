package sandbox

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// The early hand-out: the controller binds a warm Sandbox to a claim with one write (the
// claim-uid label and the claim as controller owner) and mirrors that Sandbox's Ready
// into the claim's status with a second one. A Sandbox that is bound and Ready is
// therefore the hand-out, one write before the claim says so. A claim with env is the
// exception: the env is delivered into the Sandbox after the binding, so only the
// claim's Ready ends its wait.

// handoutUID is the claim UID to recognise its hand-out by, or "" when only the claim's
// Ready may end the wait.
func handoutUID(c *extv1beta1.SandboxClaim) types.UID {
	if len(c.Spec.Env) > 0 {
		return ""
	}
	return c.UID
}

// handedOut reports whether sb is the hand-out of the claim with this UID: labelled with
// it, controlled by it, not being deleted, Running, Ready with a pod IP.
func handedOut(sb *agentsv1beta1.Sandbox, uid types.UID) bool {
	if uid == "" || sb.Labels[agentsv1beta1.LabelClaimUID] != string(uid) || sb.DeletionTimestamp != nil {
		return false
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != uid {
		return false
	}
	done, _, err := sandboxReady(0)(sb)
	return done && err == nil
}

// claimWatchDelay is how long a hand-out wait watches only the Sandboxes before it
// watches the claim too (for its failures, and for its Ready when no Sandbox watch is
// allowed): a warm hand-out comes sooner and then costs one watch, not two. After a wait
// the claim's Ready ended (no hand-out came: a controller that does not label what it
// binds) the client watches the next claim at once.
const claimWatchDelay = 250 * time.Millisecond

// waitClaimOrHandout waits for the claim as waitClaim does, with the hand-out watched
// beside it: whichever shows a Ready Sandbox first ends the wait. The claim is watched
// from claimWatchDelay on (at once when the hand-out watch is refused). The claim's
// failures end the wait as before; a refused hand-out watch leaves the claim to decide.
func (s *Sandbox) waitClaimOrHandout(ctx context.Context, start *extv1beta1.SandboxClaim) error {
	ctx, cancel := s.c.withReadyTimeout(ctx)
	defer cancel()
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	found := make(chan *agentsv1beta1.Sandbox, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if sb, err := s.c.handout.wait(hctx, s.c.kube, s.ns, start.UID, start.ResourceVersion); err == nil && sb != nil {
			found <- sb
			ccancel()
		}
	}()
	wait := claimWatchDelay
	if s.c.claimFirst.Load() {
		wait = 0
	}
	delay := time.NewTimer(wait)
	defer delay.Stop()
	var err error
	select {
	case <-ended: // handed out, or the watch was refused (or ctx ended): then the claim decides
		if len(found) == 0 {
			err = s.waitClaimIn(cctx, start, true, false)
		}
	case <-delay.C:
		err = s.waitClaimIn(cctx, start, true, false)
	}
	hcancel()
	<-ended
	select {
	case sb := <-found:
		s.c.claimFirst.Store(false)
		s.set(sb)
		return nil
	default:
		if err == nil {
			s.c.claimFirst.Store(true)
		}
		return err
	}
}
