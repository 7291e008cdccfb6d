package sandbox

import (
	"fmt"
	"slices"
	"testing"
)

// TestEnvOrder: WithEnv and WithEnvFrom set their variables in the order of the names,
// whatever the map's iteration order (Kubernetes expands $(VAR) only from earlier ones).
func TestEnvOrder(t *testing.T) {
	plain := map[string]string{}
	from := map[string]EnvSource{}
	var want []string
	for i := 0; i < 32; i++ {
		k := fmt.Sprintf("V%02d", i)
		plain[k] = "$(V00)"
		from[k] = EnvFromSecret("s", k)
		want = append(want, k)
	}
	tests := []struct {
		name string
		opt  CreateOption
	}{
		{name: "WithEnv", opt: WithEnv(plain)},
		{name: "WithEnvFrom", opt: WithEnvFrom(from)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 5 { // map order varies between iterations
				var o createOptions
				tc.opt(&o)
				var got []string
				for _, e := range o.env {
					got = append(got, e.Name)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("env order %v, want %v", got, want)
				}
			}
		})
	}
}
