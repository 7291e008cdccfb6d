package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"golang.org/x/net/http2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// limiterErr is client-go's error when its rate limiter has no token before the
// context's deadline (a plain error; the context has not ended yet).
var limiterErr = fmt.Errorf("client rate limiter Wait returned an error: %w",
	errors.New("rate: Wait(n=1) would exceed context deadline"))

// TestWaitRateLimitedAndHTTP2: client-go's rate limiter refusing to wait past the
// deadline ends a wait as its timeout (*TimeoutError, ErrTimeout) at once; an HTTP/2
// stream error is retried.
func TestWaitRateLimitedAndHTTP2(t *testing.T) {
	tests := []struct {
		name    string
		getErr  error
		wantErr bool
	}{
		{"rate limiter", limiterErr, true},
		{"HTTP/2 stream error, then the claim", &url.Error{Op: "Get", URL: "https://api/x",
			Err: http2.StreamError{StreamID: 3, Code: http2.ErrCodeRefusedStream}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.sbx.Add(readySandbox("sb-1", "10.0.0.1"))
			k.clm.Add(&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Namespace: "ns"},
				Status: extv1beta1.SandboxClaimStatus{Sandbox: extv1beta1.SandboxReference{Name: "sb-1"},
					Conditions: []metav1.Condition{cond("Ready", "True", "DependenciesReady", 1)}}})
			k.clm.getErrs = []error{tc.getErr}
			c := newTestClient(t, k)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			sb, err := c.AttachClaim(ctx, "claim-1")
			if !tc.wantErr {
				if err != nil || sb.Name() != "sb-1" {
					t.Fatalf("AttachClaim: %v", err)
				}
				return
			}
			var te *TimeoutError
			if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || time.Since(start) > time.Second {
				t.Errorf("AttachClaim: %v after %v, want a *TimeoutError at once", err, time.Since(start))
			}
		})
	}
}
