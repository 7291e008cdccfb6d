//go:build integration

package sandbox

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// suspendExternally suspends the Sandbox as the idle controller would (a merge patch
// from outside the handle under test) and waits for the Suspended condition.
func suspendExternally(t *testing.T, c *Client, name string) {
	t.Helper()
	other, err := c.Attach(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Suspend(testCtx(t)); err != nil {
		t.Fatalf("suspend: %v", err)
	}
}

// TestIntegrationStackIdleResume: a suspended Sandbox whose idle policy resumes on
// traffic answers a command sent through direct and pod-proxy modes (the handles were
// attached before the suspend, as a long-lived client's would be); with
// resumeOnTraffic false the call fails with ErrSuspended.
func TestIntegrationStackIdleResume(t *testing.T) {
	s := needStack(t)
	c := stackClient(t, s, ModePodProxy)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// A long timeout: the controller must not suspend it on its own during the test.
	sb, err := c.CreateSandboxFromTemplate(ctx, s.template, WithIdlePolicy(time.Hour, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	for _, mode := range []Mode{ModePodProxy, ModeDirect} {
		t.Run(string(mode), func(t *testing.T) {
			h, err := stackClient(t, s, mode).Attach(testCtx(t), sb.Name())
			if err != nil {
				t.Fatal(err)
			}
			if mode == ModeDirect {
				d, err := net.DialTimeout("tcp", net.JoinHostPort(h.PodIP(), strconv.Itoa(DefaultPort)), 2*time.Second)
				if err != nil {
					t.Skipf("direct: pod IP %s not reachable from here: %v", h.PodIP(), err)
				}
				d.Close()
			}
			oldIP := h.PodIP()
			suspendExternally(t, c, sb.Name())
			start := time.Now()
			r, err := h.Run(testCtx(t), "echo awake")
			if err != nil || r.Stdout != "awake\n" {
				t.Fatalf("run on the suspended sandbox: %+v %v", r, err)
			}
			t.Logf("%s: resumed and ran in %v (pod IP %s -> %s)", mode, time.Since(start), oldIP, h.PodIP())
			if !h.IsReady() {
				t.Error("handle not Ready after the resume")
			}
		})
	}
	t.Run("resumeOnTraffic false", func(t *testing.T) {
		patch := []byte(`{"spec":{"idlePolicy":{"timeoutSeconds":3600,"resumeOnTraffic":false}}}`)
		if _, err := c.kube.sandboxes(s.ns).Patch(testCtx(t), sb.Name(), types.MergePatchType, patch,
			metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		h, err := stackClient(t, s, ModePodProxy).Attach(testCtx(t), sb.Name())
		if err != nil {
			t.Fatal(err)
		}
		suspendExternally(t, c, sb.Name())
		var se *SuspendedError
		if _, err := h.Run(testCtx(t), "true"); !errors.Is(err, ErrSuspended) || !errors.As(err, &se) || !se.HasPolicy {
			t.Errorf("run: %v, want a SuspendedError with the policy", err)
		}
	})
}
