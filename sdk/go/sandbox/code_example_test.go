package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/sandbox"
)

// Stateful code execution: the state of one RunCode is there for the next; a plot comes
// back as PNG bytes.
func ExampleSandbox_RunCode() {
	ctx := context.Background()
	c, err := sandbox.NewClient(sandbox.Options{Namespace: "default"})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Attach(ctx, "my-sandbox")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sb.RunCode(ctx, "x = 21", sandbox.CodeOptions{}); err != nil {
		log.Fatal(err)
	}
	ex, err := sb.RunCode(ctx, "print('computing')\nx * 2", sandbox.CodeOptions{
		OnStdout: func(s string) { fmt.Print(s) },
		Timeout:  time.Minute,
	})
	switch {
	case errors.Is(err, sandbox.ErrCodeTimeout):
		log.Fatal("interrupted after a minute")
	case err != nil:
		log.Fatal(err)
	case ex.Error != nil:
		log.Fatal(ex.Error.Traceback)
	}
	fmt.Println(ex.Text()) // 42

	ex, err = sb.RunCode(ctx, "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])", sandbox.CodeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range ex.Results {
		if png, _ := r.PNG(); png != nil {
			_ = os.WriteFile("plot.png", png, 0o644)
		}
	}
}
