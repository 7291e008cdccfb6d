package sandbox

import (
	"runtime/debug"
	"sync"
)

// ModulePath is the Go module path of this SDK.
const ModulePath = "github.com/agent-sandbox-dev/agent-sandbox/sdk/go"

// Version returns the SDK's module version as the Go toolchain recorded it in the
// program's build info: "v0.3.1" when the module came from a release tag
// (sdk/go/v0.3.1), a pseudo-version for an untagged commit, and "(devel)" when it was
// built in-tree or through a replace directive without a version. It returns "(unknown)"
// when the binary carries no build info.
func Version() string {
	versionOnce.Do(func() {
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			version = "(unknown)"
			return
		}
		version = moduleVersion(bi)
	})
	return version
}

var (
	versionOnce sync.Once
	version     string
)

// moduleVersion finds this module in bi: the main module (tests, in-tree programs) or a
// dependency, possibly replaced.
func moduleVersion(bi *debug.BuildInfo) string {
	if bi.Main.Path == ModulePath {
		return orDevel(bi.Main.Version)
	}
	for _, m := range bi.Deps {
		if m.Path != ModulePath {
			continue
		}
		if m.Replace != nil {
			return orDevel(m.Replace.Version)
		}
		return orDevel(m.Version)
	}
	return "(devel)"
}

func orDevel(v string) string {
	if v == "" {
		return "(devel)"
	}
	return v
}
