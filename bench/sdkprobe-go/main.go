// SPDX-License-Identifier: Apache-2.0

// Command sdkprobe-go is bench/sdk_probe.py for the Go SDK: one warm claim at a time, as
// an agent sees it: the time Client.CreateSandbox(ctx, pool) takes, from the call to the
// returned handle, on an idle pool.
//
// The pool ("pool" of template "tpl") and the simulated kubelet are as-loadgen's
// (--scenario serve-pool). Before each claim the probe waits, as the claim probe does,
// until the previous claim's refill exists and the pool is Ready at its size again, then
// 200 ms more. Claims alternate between two clients: one with the early hand-out (the
// default: done once a Sandbox bound to the claim is Ready) and one that waits for the
// claim's own Ready (Options.WaitForClaimReady), so both are measured on the same cluster
// in the same minutes. Every handle is checked: its Sandbox must be controlled by the
// claim, labelled with the claim's UID and Ready.
//
//	sdkprobe-go --kubeconfig KC --namespace NS [--count 20] [--pool-size 2]
//	            [--timeout 60] [--out FILE] [--records FILE]
//
// Prints (or writes) JSON: per mode n, p50/p90/p99/max/mean in ms; "ok" false when a
// claim failed or a handle did not check out. --records appends "mode claim sandbox ms"
// rows (TSV).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/sandbox"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/typed"
)

const (
	gap  = 200 * time.Millisecond
	poll = 20 * time.Millisecond
	pool = "pool"
)

// The modes, in the order the claims alternate (and the result's keys, as sdk_probe.py's).
var modes = []string{"early_handout", "claim_ready"}

// pct is the nearest-rank percentile of sorted xs.
func pct(s []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(len(s)-1, max(0, i))]
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func summary(xs []float64) map[string]any {
	if len(xs) == 0 {
		return map[string]any{"n": 0}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return map[string]any{
		"n":       len(s),
		"p50_ms":  round2(pct(s, 50)),
		"p90_ms":  round2(pct(s, 90)),
		"p99_ms":  round2(pct(s, 99)),
		"max_ms":  round2(s[len(s)-1]),
		"mean_ms": round2(sum / float64(len(s))),
	}
}

// waitIdle returns once the previous claim's refill exists and the pool is Ready at its
// size, and gap later.
func waitIdle(ctx context.Context, cs *typed.Clientset, ns string, size, done int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	have, ready := 0, 0
	for time.Now().Before(deadline) {
		l, err := cs.Sandboxes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		p, err := cs.SandboxWarmPools(ns).Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return err
		}
		have, ready = len(l.Items), int(p.Status.ReadyReplicas)
		if have >= size+done && ready >= size {
			time.Sleep(gap)
			return nil
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("pool %s/%s not back to %d Ready members in %v after %d claims (%d Sandboxes, %d Ready in the pool's status)",
		ns, pool, size, timeout, done, have, ready)
}

// check says why the handle is wrong: its Sandbox is not bound to the claim and Ready
// ("" if it is).
func check(ctx context.Context, cs *typed.Clientset, ns, claim, name string) string {
	cl, err := cs.SandboxClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("claim %s: %v", claim, err)
	}
	sb, err := cs.Sandboxes(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("claim %s: Sandbox %s: %v", claim, name, err)
	}
	if !handedOut(sb, string(cl.UID)) {
		return fmt.Sprintf("claim %s: Sandbox %s is not bound to it and Ready", claim, name)
	}
	return ""
}

// handedOut: labelled with the claim's UID, controlled by the claim, not being deleted,
// Running, Ready with a pod IP (the SDKs' own test, written out again here).
func handedOut(sb *agentsv1beta1.Sandbox, uid string) bool {
	if sb.Labels[agentsv1beta1.LabelClaimUID] != uid || sb.DeletionTimestamp != nil {
		return false
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || string(ref.UID) != uid {
		return false
	}
	if m := sb.Spec.OperatingMode; m != "" && m != agentsv1beta1.OperatingModeRunning {
		return false
	}
	ready := agentsv1beta1.FindCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && len(sb.Status.PodIPs) > 0
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (required)")
	ns := flag.String("namespace", "", "namespace of the pool (required)")
	count := flag.Int("count", 20, "claims per mode")
	size := flag.Int("pool-size", 2, "the pool's size")
	timeoutS := flag.Float64("timeout", 60, "bound of each wait and each claim, in seconds")
	out := flag.String("out", "", "write the result here (default: stdout)")
	records := flag.String("records", "", "append mode, claim, sandbox, ms as TSV")
	flag.Parse()
	timeout := time.Duration(*timeoutS * float64(time.Second))
	if *kubeconfig == "" || *ns == "" {
		fmt.Fprintln(os.Stderr, "sdkprobe-go: --kubeconfig and --namespace are required")
		os.Exit(2)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdkprobe-go: %v\n", err)
		os.Exit(1)
	}
	// The poller gets the SDK's rate limit; client-go's transport cache gives it the same
	// connection as the clients (as sdk_probe.py polls on the measured client).
	rc.QPS, rc.Burst = 100, 200
	cs, err := typed.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdkprobe-go: %v\n", err)
		os.Exit(1)
	}
	clients := map[string]*sandbox.Client{}
	for _, m := range modes {
		c, err := sandbox.NewClient(sandbox.Options{RestConfig: rc, Namespace: *ns,
			Connection: sandbox.Connection{Mode: sandbox.ModeDirect}, WaitForClaimReady: m == "claim_ready"})
		if err != nil {
			fmt.Fprintf(os.Stderr, "sdkprobe-go: %v\n", err)
			os.Exit(1)
		}
		defer c.CloseIdleConnections()
		clients[m] = c
	}
	ctx := context.Background()
	times := map[string][]float64{}
	var errs, rows []string
	for i := 0; i < 2**count; i++ {
		mode := modes[i%2]
		if err := waitIdle(ctx, cs, *ns, *size, i, timeout); err != nil {
			errs = append(errs, err.Error())
			break
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		t0 := time.Now()
		sb, err := clients[mode].CreateSandbox(cctx, pool)
		ms := float64(time.Since(t0).Nanoseconds()) / 1e6
		cancel()
		if err != nil { // reported; the probe goes on
			errs = append(errs, fmt.Sprintf("%s claim %d: %v", mode, i, err))
			continue
		}
		times[mode] = append(times[mode], ms)
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%.2f", mode, sb.ClaimName(), sb.Name(), ms))
		if why := check(ctx, cs, *ns, sb.ClaimName(), sb.Name()); why != "" {
			errs = append(errs, mode+": "+why)
		}
	}
	res := map[string]any{}
	ok := len(errs) == 0
	for _, m := range modes {
		res[m] = summary(times[m])
		ok = ok && len(times[m]) == *count
	}
	res["ok"] = ok
	res["errors"] = append([]string{}, errs[:min(len(errs), 20)]...)
	if err := report(res, *out, *records, rows); err != nil {
		fmt.Fprintf(os.Stderr, "sdkprobe-go: %v\n", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// report writes the result (to path, else stdout) and appends the record rows.
func report(res map[string]any, path, records string, rows []string) error {
	text, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return err
	}
	if path == "" {
		fmt.Println(string(text))
	} else if err := os.WriteFile(path, append(text, '\n'), 0o644); err != nil {
		return err
	}
	if records == "" || len(rows) == 0 {
		return nil
	}
	f, err := os.OpenFile(records, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(rows, "\n") + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
