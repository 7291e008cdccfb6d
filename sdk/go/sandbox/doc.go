// Package sandbox is the Go client of Agent Sandbox: it creates sandboxes (from a warm
// pool through a SandboxClaim, or from a SandboxTemplate or a Sandbox spec), waits for
// them by watch, runs processes in them (buffered, streaming, with stdin, signals and
// PTYs), reads and writes their files as streams, and suspends, resumes and deletes
// them.
//
// # Connection modes
//
// The Kubernetes side always uses the API server (kubeconfig or in-cluster config).
// Processes and files reach sandboxd inside the sandbox in one of three modes:
//
//   - ModeRouter: through sandbox-router (Connection.RouterURL) with the X-Sandbox-ID,
//     X-Sandbox-Namespace and X-Sandbox-Port headers and a bearer token.
//   - ModeDirect: straight to the pod IP (programs inside the cluster network).
//   - ModePodProxy (the default without a RouterURL): through the API server's pod
//     proxy, with the kubeconfig's credentials. No kubectl, no port-forward.
//
// # Errors
//
// Errors match the sentinel errors of this package with errors.Is (ErrNotFound,
// ErrTimeout, ErrClaimFailed, ErrTemplateNotFound, ...) and carry details in
// *HTTPError, *ClaimFailedError, *SandboxFailedError and *TimeoutError (errors.As).
// Waits that run out of time also match context.DeadlineExceeded.
//
// # Contexts and goroutines
//
// Every call takes a context. A wait without a context deadline is bounded by
// Options.ReadyTimeout. The only goroutines the package starts belong to a streamed
// Process (they end when the process ends or its context is cancelled; a stdin Read
// that blocks keeps its goroutine until it returns, as in os/exec), to the inline stdin
// of Exec and StartBackground (read on a goroutine so the call ends with its context;
// a blocking Read keeps it until it returns), to Files.Create (it ends on Close or when
// its context ends) and to the hand-out stream of CreateSandbox (one per namespace; it
// runs on up to 30 s after the last claim wait, or until Client.CloseIdleConnections,
// which stops it without waiting for its goroutine to end, or Client.Close, which waits).
package sandbox
