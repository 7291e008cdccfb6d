package sandbox

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"main module", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, "(devel)"},
		{"tagged dependency", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.34.4"}, {Path: ModulePath, Version: "v0.3.1"}},
		}, "v0.3.1"},
		{"replaced by a directory", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v0.0.0", Replace: &debug.Module{Path: "../sdk/go"}}},
		}, "(devel)"},
		{"replaced by a version", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v0.0.0", Replace: &debug.Module{Path: ModulePath, Version: "v0.2.0"}}},
		}, "v0.2.0"},
		{"empty main version", debug.BuildInfo{Main: debug.Module{Path: ModulePath}}, "(devel)"},
	}
	for _, tc := range tests {
		if got := moduleVersion(&tc.bi); got != tc.want {
			t.Errorf("%s: moduleVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestVersionInTree(t *testing.T) {
	// The test binary's main module is this SDK, built from the working tree.
	if got := Version(); got != "(devel)" && got[0] != 'v' {
		t.Errorf("Version() = %q, want (devel) or a module version", got)
	}
}
