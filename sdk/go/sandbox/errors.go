package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors. Every error returned by this package that has one of these meanings
// matches it with errors.Is; the concrete types below carry the details (errors.As).
var (
	// ErrNotFound: the sandbox, claim, file or process does not exist (HTTP 404).
	ErrNotFound = errors.New("sandbox: not found")
	// ErrSandboxDeleted: the claim or Sandbox was deleted (or made again under its name:
	// another UID) while waiting for it. It also matches ErrNotFound. A wait for an object
	// of which no version was ever seen is ErrNotFound only.
	ErrSandboxDeleted = errors.New("sandbox: deleted while waiting")
	// ErrTimeout: a wait ran out of time (also matches context.DeadlineExceeded).
	ErrTimeout = errors.New("sandbox: timed out")
	// ErrClaimFailed: the controller reported a terminal failure of a claim.
	ErrClaimFailed = errors.New("sandbox: claim failed")
	// ErrTemplateNotFound: the claim's pool references a missing SandboxTemplate.
	ErrTemplateNotFound = errors.New("sandbox: template not found")
	// ErrWarmPoolNotFound: the claim references a missing SandboxWarmPool.
	ErrWarmPoolNotFound = errors.New("sandbox: warm pool not found")
	// ErrSandboxFailed: the Sandbox reached a terminal state (pod finished, expired).
	ErrSandboxFailed = errors.New("sandbox: sandbox failed")
	// ErrSuspended: the Sandbox is suspended; Resume it first.
	ErrSuspended = errors.New("sandbox: suspended")
	// ErrNotReady: the sandbox has no address to connect to yet, or the router held a
	// request for a starting Sandbox and answered 503 when it did not become Ready in time
	// (not retried; the error also unwraps to the router's *HTTPError).
	ErrNotReady = errors.New("sandbox: not ready")
	// ErrClosed: the handle was deleted, or the process stream has ended.
	ErrClosed = errors.New("sandbox: closed")
	// ErrInvalidPath: a file path is empty, has control characters or escapes the root.
	ErrInvalidPath = errors.New("sandbox: invalid path")
	// ErrInvalidArgument: a request was rejected as malformed (HTTP 400).
	ErrInvalidArgument = errors.New("sandbox: invalid argument")
	// ErrUnauthorized: missing or rejected credentials (HTTP 401).
	ErrUnauthorized = errors.New("sandbox: unauthorized")
	// ErrForbidden: access denied, e.g. a path outside the root (HTTP 403).
	ErrForbidden = errors.New("sandbox: forbidden")
	// ErrConflict: e.g. deleting a non-empty directory without recursion (HTTP 409).
	ErrConflict = errors.New("sandbox: conflict")
	// ErrTooLarge: a response or upload exceeds a limit (HTTP 413 or a client cap).
	ErrTooLarge = errors.New("sandbox: too large")
	// ErrUnavailable: the sandbox, router or proxy is temporarily unavailable (502, 503,
	// 504, 429).
	ErrUnavailable = errors.New("sandbox: unavailable")
	// ErrIsDirectory: a file operation hit a directory.
	ErrIsDirectory = errors.New("sandbox: is a directory")
	// ErrNotDirectory: a listing hit a regular file.
	ErrNotDirectory = errors.New("sandbox: not a directory")
)

// HTTPError is a non-2xx answer of sandboxd, the router or the API server's pod proxy.
type HTTPError struct {
	Op         string // e.g. "read /a.txt", "run"
	StatusCode int
	Code       string // sandboxd's error code (e.g. "NOT_FOUND"), when given
	Message    string // the server's message, or the start of the body
}

func (e *HTTPError) Error() string {
	msg := e.Message
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	return fmt.Sprintf("sandbox: %s: HTTP %d: %s", e.Op, e.StatusCode, msg)
}

// Is maps the status code to the sentinel errors.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrInvalidArgument:
		return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusRequestedRangeNotSatisfiable
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrTooLarge:
		return e.StatusCode == http.StatusRequestEntityTooLarge
	case ErrUnavailable:
		switch e.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable,
			http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// ClaimFailedError is a terminal failure reported in a claim's Ready condition.
type ClaimFailedError struct {
	Namespace, Claim string
	Reason, Message  string
}

func (e *ClaimFailedError) Error() string {
	return fmt.Sprintf("sandbox: claim %s/%s failed: %s: %s", e.Namespace, e.Claim, e.Reason, e.Message)
}

// Is matches ErrClaimFailed, and ErrTemplateNotFound / ErrWarmPoolNotFound by reason.
func (e *ClaimFailedError) Is(target error) bool {
	switch target {
	case ErrClaimFailed:
		return true
	case ErrTemplateNotFound:
		return e.Reason == "TemplateNotFound"
	case ErrWarmPoolNotFound:
		return e.Reason == "WarmPoolNotFound"
	case ErrSandboxFailed:
		return e.Reason == "SandboxExpired" || e.Reason == "PodFailed" || e.Reason == "PodSucceeded"
	}
	return false
}

// SandboxFailedError is a terminal state reported in a Sandbox's Ready condition.
type SandboxFailedError struct {
	Namespace, Name string
	Reason, Message string
}

func (e *SandboxFailedError) Error() string {
	return fmt.Sprintf("sandbox: %s/%s: %s: %s", e.Namespace, e.Name, e.Reason, e.Message)
}

// Is matches ErrSandboxFailed, or ErrSuspended for a suspended Sandbox.
func (e *SandboxFailedError) Is(target error) bool {
	if e.Reason == "SandboxSuspended" {
		return target == ErrSuspended
	}
	return target == ErrSandboxFailed
}

// TimeoutError says what a wait was waiting for when its context ended. It matches
// ErrTimeout when the deadline passed, and unwraps to the context's error
// (context.DeadlineExceeded or context.Canceled).
type TimeoutError struct {
	What       string // e.g. "claim default/sandbox-claim-x Ready"
	LastReason string // the last Ready reason seen, if any
	Err        error  // the context error
}

func (e *TimeoutError) Error() string {
	s := "sandbox: waiting for " + e.What
	if e.LastReason != "" {
		s += " (last reason " + e.LastReason + ")"
	}
	return s + ": " + e.Err.Error()
}

// Is matches ErrTimeout when the deadline was exceeded (not on cancellation).
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout && errors.Is(e.Err, context.DeadlineExceeded)
}

// Unwrap returns the context error.
func (e *TimeoutError) Unwrap() error { return e.Err }
