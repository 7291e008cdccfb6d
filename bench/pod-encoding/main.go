// SPDX-License-Identifier: Apache-2.0

// Command pod-encoding measures what a controller's Pod traffic costs kube-apiserver and
// etcd in JSON against protobuf: N Pod life cycles in a fresh namespace, each a POST and a
// merge PATCH of its labels by the "controller" client (in the encoding under test, which
// also watches the namespace's Pods), and a status update and a delete with grace 0 by a
// "kubelet" client (always protobuf, as a real kubelet). It prints the CPU seconds of the
// given processes (utime+stime from /proc) over the run, per Pod.
//
//	pod-encoding --kubeconfig KC --pids APISERVER,ETCD --encoding json|protobuf [--pods 400]
//
// Alternate the encodings over several runs on an otherwise idle API server
// (docs/performance.md, "Protobuf for Pods, Services and Events").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	protobuf = "application/vnd.kubernetes.protobuf"
	workers  = 8
)

// cpuSeconds is the summed utime+stime of pids.
func cpuSeconds(pids []int) (float64, error) {
	total := 0.0
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return 0, err
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		if len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: too short", p)
		}
		u, err1 := strconv.ParseFloat(f[11], 64)
		k, err2 := strconv.ParseFloat(f[12], 64)
		if err := errors.Join(err1, err2); err != nil {
			return 0, err
		}
		total += (u + k) / 100 // USER_HZ
	}
	return total, nil
}

func parsePids(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("--pids: %q is not a pid", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// pod is a Pod of about the size of a sandbox's: one container, 8 env vars, a port and
// a readiness probe, bound to a node that does not exist.
func pod(ns string, i int) *corev1.Pod {
	var env []corev1.EnvVar
	for j := 0; j < 8; j++ {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", j), Value: "some-value-of-moderate-length"})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("p-%d", i), Namespace: ns,
			Labels:      map[string]string{"agents.x-k8s.io/sandbox-name-hash": "abcdef12", "app": "bench"},
			Annotations: map[string]string{"agents.x-k8s.io/pod-template-hash": "1234567890"},
		},
		Spec: corev1.PodSpec{
			NodeName:                     "node-x",
			AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.local/sandbox:latest",
				Command: []string{"/bin/sandboxd", "--listen", ":8888"}, Env: env,
				Ports: []corev1.ContainerPort{{ContainerPort: 8888, Name: "http"}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8888)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

// lifeCycle is one Pod's: POST and label PATCH by ctrl, status and delete by kubelet.
func lifeCycle(ctx context.Context, ctrl, kubelet kubernetes.Interface, ns string, i int) error {
	p, err := ctrl.CoreV1().Pods(ns).Create(ctx, pod(ns, i), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if _, err := kubelet.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return err
	}
	patch := []byte(`{"metadata":{"labels":{"agents.x-k8s.io/claim-uid":"0000-1111"}}}`)
	if _, err := ctrl.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	zero := int64(0)
	return kubelet.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

func clients(kubeconfig, encoding string) (ctrl, kubelet kubernetes.Interface, err error) {
	base, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	base.QPS, base.Burst = 5000, 5000
	cc, kc := rest.CopyConfig(base), rest.CopyConfig(base)
	switch encoding {
	case "json":
		cc.ContentType = "application/json"
	case "protobuf":
		cc.ContentType, cc.AcceptContentTypes = protobuf, protobuf+",application/json"
	default:
		return nil, nil, fmt.Errorf("--encoding %q: json or protobuf", encoding)
	}
	kc.ContentType = protobuf
	if ctrl, err = kubernetes.NewForConfig(cc); err != nil {
		return nil, nil, err
	}
	kubelet, err = kubernetes.NewForConfig(kc)
	return ctrl, kubelet, err
}

func run(kubeconfig, pidList, encoding string, n int) error {
	pids, err := parsePids(pidList)
	if err != nil {
		return err
	}
	ctrl, kubelet, err := clients(kubeconfig, encoding)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns := fmt.Sprintf("pod-encoding-%d", time.Now().UnixNano())
	if _, err := kubelet.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() { _ = kubelet.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) }()
	// no service account controller on a bare API server: admission wants "default"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := kubelet.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return err
	}
	w, err := ctrl.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	want := n * 5 // added, status, labels, deletion, deleted
	events, done := 0, make(chan struct{})
	go func() {
		for range w.ResultChan() {
			if events++; events == want {
				close(done)
			}
		}
	}()
	cpu0, err := cpuSeconds(pids)
	if err != nil {
		return err
	}
	t0 := time.Now()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += workers {
				if err := lifeCycle(ctx, ctrl, kubelet, ns, i); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the watch saw %d of %d events", events, want)
	}
	cpu1, err := cpuSeconds(pids)
	if err != nil {
		return err
	}
	fmt.Printf("%s pods=%d wall=%.2fs apiserver+etcd CPU=%.2fs per Pod=%.2fms\n",
		encoding, n, time.Since(t0).Seconds(), cpu1-cpu0, (cpu1-cpu0)*1000/float64(n))
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	pids := flag.String("pids", "", "pids of kube-apiserver and etcd, comma-separated")
	encoding := flag.String("encoding", "json", "the controller client's encoding: json or protobuf")
	n := flag.Int("pods", 400, "Pod life cycles")
	flag.Parse()
	if err := run(*kubeconfig, *pids, *encoding, *n); err != nil {
		fmt.Fprintln(os.Stderr, "pod-encoding:", err)
		os.Exit(1)
	}
}
