"""agent_sandbox: Python SDK for Agent Sandbox (sync and async clients for sandboxes,
claims, processes and files)."""

from ._kubeconfig import ConfigError, KubeConfig, load_config, load_in_cluster, load_kubeconfig
from .aio import AsyncFiles, AsyncProcess, AsyncSandbox, AsyncSandboxClient
from .client import Files, Process, Sandbox, SandboxClient, connect
from .errors import (
    AuthError,
    NotFoundError,
    RequestError,
    SandboxConnectionError,
    SandboxError,
    SandboxFailedError,
    SandboxSuspendedError,
    SandboxTimeoutError,
)
from .models import (
    AutoConnection,
    ConfigMapKeyRef,
    Connection,
    DirectConnection,
    EnvValue,
    ExecResult,
    FileEntry,
    PodProxyConnection,
    ProcessEvent,
    RouterConnection,
    SandboxInfo,
    SecretKeyRef,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncFiles",
    "AsyncProcess",
    "AsyncSandbox",
    "AsyncSandboxClient",
    "AuthError",
    "AutoConnection",
    "ConfigError",
    "ConfigMapKeyRef",
    "Connection",
    "DirectConnection",
    "EnvValue",
    "ExecResult",
    "FileEntry",
    "Files",
    "KubeConfig",
    "NotFoundError",
    "PodProxyConnection",
    "Process",
    "ProcessEvent",
    "RequestError",
    "RouterConnection",
    "Sandbox",
    "SandboxClient",
    "SandboxConnectionError",
    "SandboxError",
    "SandboxFailedError",
    "SandboxInfo",
    "SandboxSuspendedError",
    "SandboxTimeoutError",
    "SecretKeyRef",
    "connect",
    "load_config",
    "load_in_cluster",
    "load_kubeconfig",
]

# Stateful code execution (docs/code-interpreter.md).
from .errors import CodeExecutionTimeout
from .models import CodeContext, CodeError, CodeResult, Execution

__all__ += ["CodeContext", "CodeError", "CodeExecutionTimeout", "CodeResult", "Execution"]
