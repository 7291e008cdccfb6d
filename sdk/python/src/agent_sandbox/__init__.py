"""agent_sandbox: Python SDK for Agent Sandbox (sync and async clients for sandboxes,
claims, processes and files)."""

from ._kubeconfig import ConfigError, KubeConfig, load_config, load_in_cluster, load_kubeconfig
from ._ports import PortURL
from .aio import AsyncFiles, AsyncProcess, AsyncSandbox, AsyncSandboxClient
from .background import AsyncBackgroundProcess, BackgroundProcess
from .client import Files, Process, Sandbox, SandboxClient, connect
from .errors import (
    AuthError,
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
    OutputEvent,
    PodProxyConnection,
    ProcessEvent,
    RouterConnection,
    SandboxInfo,
    SecretKeyRef,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncBackgroundProcess",
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
    "Connection",
    "DirectConnection",
    "EnvValue",
    "ExecResult",
    "FileEntry",
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
    "connect",
    "load_config",
    "load_in_cluster",
    "load_kubeconfig",
]
