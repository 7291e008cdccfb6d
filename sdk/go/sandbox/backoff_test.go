package sandbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
