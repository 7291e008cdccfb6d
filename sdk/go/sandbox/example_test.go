package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/sandbox"
)

// Claim a sandbox from a warm pool, run a command and delete it.
func Example() {
	ctx := context.Background()
	c, err := sandbox.NewClient(sandbox.Options{Namespace: "default"}) // kubeconfig, pod proxy
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, "python-pool")
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))

	r, err := sb.Run(ctx, "python3 -c 'print(6*7)'")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(r.Stdout, r.ExitCode)
}

// Go through sandbox-router with a bearer token.
func ExampleNewClient_router() {
	c, err := sandbox.NewClient(sandbox.Options{
		Namespace: "default",
		Connection: sandbox.Connection{
			RouterURL:   "http://127.0.0.1:8080",
			RouterToken: os.Getenv("ROUTER_TOKEN"),
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Mode())
}

// Create a sandbox straight from a template (a cold start, no warm pool).
func ExampleClient_CreateSandboxFromTemplate() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := sandbox.NewClient(sandbox.Options{})
	sb, err := c.CreateSandboxFromTemplate(ctx, "python",
		sandbox.WithEnv(map[string]string{"TASK": "42"}),
		sandbox.WithShutdownAfter(time.Hour))
	switch {
	case errors.Is(err, sandbox.ErrTemplateNotFound):
		log.Fatal("no such template")
	case errors.Is(err, sandbox.ErrTimeout):
		log.Fatal("not ready in time")
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(sb.Name(), sb.PodIP())
}

// Stream the output of a long-running process while feeding its stdin.
func ExampleSandbox_Start() {
	ctx := context.Background()
	c, _ := sandbox.NewClient(sandbox.Options{})
	sb, _ := c.Attach(ctx, "my-sandbox")

	p, err := sb.Start(ctx, sandbox.Cmd{
		Command: "while read line; do echo got: $line; done",
		Stdin:   strings.NewReader("a\nb\n"),
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit", st.ExitCode)
}

// Read the output of a process as an io.Reader, and stop it with a signal.
func ExampleProcess_Signal() {
	ctx := context.Background()
	c, _ := sandbox.NewClient(sandbox.Options{})
	sb, _ := c.Attach(ctx, "my-sandbox")

	pr, pw := io.Pipe()
	p, err := sb.Start(ctx, sandbox.Cmd{Command: "tail -f /var/log/app.log", Stdout: pw})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		_, err := p.Wait()
		pw.CloseWithError(err)
	}()
	buf := make([]byte, 4096)
	n, _ := pr.Read(buf)
	fmt.Printf("%s", buf[:n])
	_ = p.Signal(ctx, "SIGTERM")
}

// Upload and download files as streams.
func ExampleFiles() {
	ctx := context.Background()
	c, _ := sandbox.NewClient(sandbox.Options{})
	sb, _ := c.Attach(ctx, "my-sandbox")
	f := sb.Files()

	src, _ := os.Open("dataset.csv")
	defer src.Close()
	if err := f.Write(ctx, "data/dataset.csv", src, sandbox.WithMode(0o600)); err != nil {
		log.Fatal(err)
	}
	entries, _ := f.List(ctx, "data")
	for _, e := range entries {
		fmt.Println(e.Name, e.Size, e.Mode)
	}
	rc, err := f.Read(ctx, "data/dataset.csv")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	_, _ = io.Copy(os.Stdout, rc)
}

// Suspend a sandbox (its Pod is deleted, volumes stay) and resume it later.
func ExampleSandbox_Suspend() {
	ctx := context.Background()
	c, _ := sandbox.NewClient(sandbox.Options{})
	sb, _ := c.Attach(ctx, "my-sandbox")
	if err := sb.Suspend(ctx); err != nil {
		log.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("new pod IP", sb.PodIP())
}
