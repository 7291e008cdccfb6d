"""agent_sandbox_sdk: Python SDK for Agent Sandbox (sync and async clients for sandboxes,
claims, processes and files)."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

from ._fsops import AsyncFileWatch, FileWatch
from ._kubeconfig import ConfigError, KubeConfig, load_config, load_in_cluster, load_kubeconfig
from ._ports import PortURL
from .aio import AsyncFiles, AsyncProcess, AsyncSandbox, AsyncSandboxClient
from .background import AsyncBackgroundProcess, BackgroundProcess
from .client import Files, Process, Sandbox, SandboxClient, connect
from .errors import (
    AuthError,
    ConflictError,
    NotFoundError,
    ProcessExitedError,
    RequestError,
    SandboxConnectionError,
    SandboxError,
    SandboxFailedError,
    SandboxSuspendedError,
    SandboxTimeoutError,
    TooManyProcessesError,
)
from .models import (
    AutoConnection,
    BackgroundProcessInfo,
    ConfigMapKeyRef,
    Connection,
    DirectConnection,
    EnvValue,
    ExecResult,
    FileEntry,
    FileEvent,
    FileStat,
    OutputEvent,
    PodProxyConnection,
    ProcessEvent,
    RouterConnection,
    SandboxInfo,
    SecretKeyRef,
    WriteResult,
)

try:
    # The installed distribution's version (hack/version.sh --pep440 when it was built).
    __version__ = _dist_version("agent-sandbox-sdk")
except PackageNotFoundError:  # imported from a source tree that was not installed
    __version__ = "0+unknown"

__all__ = [
    "AsyncBackgroundProcess",
    "AsyncFileWatch",
    "AsyncFiles",
    "AsyncProcess",
    "AsyncSandbox",
    "AsyncSandboxClient",
    "AuthError",
    "AutoConnection",
    "BackgroundProcess",
    "BackgroundProcessInfo",
    "ConfigError",
    "ConfigMapKeyRef",
    "ConflictError",
    "Connection",
    "DirectConnection",
    "EnvValue",
    "ExecResult",
    "FileEntry",
    "FileEvent",
    "FileStat",
    "FileWatch",
    "Files",
    "KubeConfig",
    "NotFoundError",
    "OutputEvent",
    "PodProxyConnection",
    "PortURL",
    "Process",
    "ProcessEvent",
    "ProcessExitedError",
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
    "TooManyProcessesError",
    "WriteResult",
    "connect",
    "load_config",
    "load_in_cluster",
    "load_kubeconfig",
]

# Stateful code execution (docs/code-interpreter.md).
from .errors import CodeExecutionTimeout
from .models import CodeContext, CodeError, CodeResult, Execution

__all__ += ["CodeContext", "CodeError", "CodeExecutionTimeout", "CodeResult", "Execution"]
