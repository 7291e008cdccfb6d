// Command upstream-go drives upstream's Go SDK (sigs.k8s.io/agent-sandbox, in its default
// mode: empty Options, so the kubeconfig from $KUBECONFIG and a SPDY port-forward to the
// sandbox-router-svc of the sandbox's namespace) against a running stack: claim a sandbox
// from a warm pool, run a command, write, read, list and test a file, delete the claim.
// It prints one "ok"/"not ok" line per step and exits 1 on the first failure.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
)

func check(name string, err error) {
	if err != nil {
		fmt.Printf("not ok - %s: %v\n", name, err)
		os.Exit(1)
	}
	fmt.Printf("ok - %s\n", name)
}

func main() {
	pool := "python-pool"
	if len(os.Args) > 1 {
		pool = os.Args[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client, err := sandbox.NewClient(ctx, sandbox.Options{})
	check("NewClient with empty Options", err)
	sb, err := client.CreateSandbox(ctx, pool, "")
	check("CreateSandbox from "+pool+" (default namespace, port-forward to the router)", err)
	defer func() {
		check("DeleteSandbox", client.DeleteSandbox(context.Background(), sb.ClaimName(), ""))
	}()
	res, err := sb.Run(ctx, "python3 -c 'print(6*7)'")
	if err == nil && (strings.TrimSpace(res.Stdout) != "42" || res.ExitCode != 0) {
		err = fmt.Errorf("stdout %q exit %d", res.Stdout, res.ExitCode)
	}
	check("Run prints 42", err)
	payload := []byte("round trip \x00\xff from the Go SDK\n")
	check("Write go-sdk.bin", sb.Write(ctx, "go-sdk.bin", payload))
	got, err := sb.Read(ctx, "go-sdk.bin")
	if err == nil && !bytes.Equal(got, payload) {
		err = fmt.Errorf("read %q", got)
	}
	check("Read returns the bytes written", err)
	entries, err := sb.List(ctx, ".")
	if err == nil {
		err = fmt.Errorf("go-sdk.bin not listed")
		for _, e := range entries {
			if e.Name == "go-sdk.bin" {
				err = nil
			}
		}
	}
	check("List shows the file", err)
	ok, err := sb.Exists(ctx, "go-sdk.bin")
	if err == nil && !ok {
		err = fmt.Errorf("Exists is false")
	}
	check("Exists is true", err)
}
