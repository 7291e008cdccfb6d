package typed

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

type seen struct {
	method, path, query, ctype, body string
}

func fakeAPI(t *testing.T) (*Clientset, func() []seen) {
	var mu sync.Mutex
	var log []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			ev := `{"type":"ADDED","object":{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"w1","resourceVersion":"7"},"spec":{"podTemplate":{"spec":{"containers":[]}}}}}`
			_, _ = w.Write([]byte(ev + "\n"))
		case r.Method == http.MethodDelete:
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
		case r.URL.Path == "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes" && r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a"},"spec":{"podTemplate":{"spec":{"containers":[]}}},"status":{"podIPs":["10.0.0.1"]}}]}`))
		case r.URL.Path == "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims/missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		default:
			// Echo the body (create, update, patch) or a named object.
			if len(b) > 0 && b[0] == '{' && r.Method != http.MethodPatch {
				_, _ = w.Write(b)
				return
			}
			_, _ = w.Write([]byte(`{"metadata":{"name":"x","resourceVersion":"9"},"spec":{"warmPoolRef":{"name":"p"},"operatingMode":"Suspended","podTemplate":{"spec":{"containers":[]}}}}`))
		}
	}))
	t.Cleanup(srv.Close)
	cs, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return cs, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), log...)
	}
}

func TestVerbs(t *testing.T) {
	cs, log := fakeAPI(t)
	ctx := context.Background()
	const sbx = "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes"
	const clm = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims"
	tests := []struct {
		name   string
		do     func() error
		method string
		path   string
		check  func(s seen) bool
	}{
		{"get", func() error {
			_, err := cs.Sandboxes("ns").Get(ctx, "x", metav1.GetOptions{})
			return err
		}, "GET", sbx + "/x", nil},
		{"list with selector", func() error {
			l, err := cs.Sandboxes("ns").List(ctx, metav1.ListOptions{LabelSelector: "a=b"})
			if err == nil && (len(l.Items) != 1 || l.Items[0].Status.PodIPs[0] != "10.0.0.1") {
				t.Errorf("list %+v", l)
			}
			return err
		}, "GET", sbx, func(s seen) bool { return s.query == "labelSelector=a%3Db" }},
		{"create claim", func() error {
			c, err := cs.SandboxClaims("ns").Create(ctx, &extv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "c-"},
				Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.LocalObjectReference{Name: "pool"}}},
				metav1.CreateOptions{})
			if err == nil && c.Spec.WarmPoolRef.Name != "pool" {
				t.Errorf("created %+v", c)
			}
			return err
		}, "POST", clm, func(s seen) bool {
			var m map[string]any
			return json.Unmarshal([]byte(s.body), &m) == nil && s.ctype == "application/json"
		}},
		{"merge patch", func() error {
			s, err := cs.Sandboxes("ns").Patch(ctx, "x", types.MergePatchType, []byte(`{"spec":{"operatingMode":"Suspended"}}`), metav1.PatchOptions{})
			if err == nil && s.Spec.OperatingMode != agentsv1beta1.OperatingModeSuspended {
				t.Errorf("patched %+v", s.Spec)
			}
			return err
		}, "PATCH", sbx + "/x", func(s seen) bool { return s.ctype == "application/merge-patch+json" }},
		{"update status", func() error {
			_, err := cs.SandboxWarmPools("ns").UpdateStatus(ctx, &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.UpdateOptions{})
			return err
		}, "PUT", "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxwarmpools/p/status", nil},
		{"update template", func() error {
			_, err := cs.SandboxTemplates("ns").Update(ctx, &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}, metav1.UpdateOptions{})
			return err
		}, "PUT", "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxtemplates/t", nil},
		{"delete with propagation", func() error {
			bg := metav1.DeletePropagationBackground
			return cs.SandboxClaims("ns").Delete(ctx, "c", metav1.DeleteOptions{PropagationPolicy: &bg})
		}, "DELETE", clm + "/c", func(s seen) bool { return json.Valid([]byte(s.body)) && len(s.body) > 2 }},
		{"list all namespaces", func() error {
			_, err := cs.Sandboxes("").List(ctx, metav1.ListOptions{})
			return err
		}, "GET", "/apis/agents.x-k8s.io/v1beta1/sandboxes", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(log())
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			l := log()
			if len(l) != n+1 {
				t.Fatalf("%d requests", len(l)-n)
			}
			s := l[n]
			if s.method != tc.method || s.path != tc.path || (tc.check != nil && !tc.check(s)) {
				t.Errorf("request %+v", s)
			}
		})
	}
}

func TestWatchAndErrors(t *testing.T) {
	cs, _ := fakeAPI(t)
	ctx := context.Background()
	w, err := cs.Sandboxes("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
	if !ok || sb.Name != "w1" || sb.ResourceVersion != "7" {
		t.Fatalf("event %+v", ev)
	}
	_, err = cs.SandboxClaims("ns").Get(ctx, "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("404: %v", err)
	}
}
