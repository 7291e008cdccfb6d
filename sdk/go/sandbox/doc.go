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
// *HTTPError, *ClaimFailedError, *SandboxFailedError, *TimeoutError and
// *StreamIdleError (errors.As). Waits that run out of time also match
// context.DeadlineExceeded, and so does a stream that went silent.
//
// # Time limits
//
// Every call takes a context, and a context's deadline always wins (it is never cut
// short nor extended). A call whose context has no deadline (context.Background())
// still ends when the router, sandboxd or the API server stops answering: each request
// gets the default limit Options.DefaultTimeout (180 s unless set; NoTimeout: none) by
// kind of call. An ordinary request must be answered within it; Exec, Run and RunCode
// get their own timeout (sandboxd's 300 s when they set none) plus it, and so does each
// held request of BackgroundProcess.Wait; a stream (Start, Files.Read, Write, Create,
// Watch, BackgroundProcess.Output, Sandbox.HTTPClient) gets it until its answer begins,
// then lasts as long as its context; Files.ReadFile, WriteFile, ReadRange and WriteMany
// end after it without progress. Waits for Ready are bounded by Options.ReadyTimeout
// instead. A call the default limit ended returns an error that matches
// context.DeadlineExceeded.
//
// Once a stream has begun, a connection that died without a word (a half-open TCP
// connection: a node lost, a partition) would hold it for ever, so every answer of
// sandboxd is also bounded by Options.StreamIdleTimeout (300 s unless set; NoTimeout:
// none), whatever the context's deadline: a read of its body (a process's output, a
// watch's events, a file, a run's answer) that waits that long for a byte fails with a
// *StreamIdleError, which matches context.DeadlineExceeded and ErrUnavailable, and the
// connection is closed. sandboxd sends a keepalive after 15 s of silence on each of its
// streams, so a silent process is not cut; the time a caller takes between reads does
// not count. The answers of Sandbox.HTTPClient (the sandbox's own servers, which may be
// silent for long) are bounded only when Options.HTTPClientStreamIdleTimeout is set.
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
