// Package apitest holds shared checks for the API type tests: JSON round trips of the
// manifests in api/examples and deep-copy independence.
package apitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"
)

// ExamplesDir finds api/examples of the repository from the test's working directory.
func ExamplesDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		p := filepath.Join(d, "api", "examples")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
	}
	t.Skip("api/examples not found above " + dir + " (module used outside its repository)")
	return ""
}

// normalize drops nulls and empty objects, which the Go types emit for unset struct
// fields and the manifests leave out.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			n := normalize(e)
			if n == nil {
				continue
			}
			if m, ok := n.(map[string]any); ok && len(m) == 0 {
				continue
			}
			out[k] = n
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	default:
		return v
	}
}

// RoundTrip decodes the YAML manifest file into obj, encodes obj again and fails when
// a field was lost or changed on the way.
func RoundTrip(t *testing.T, file string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		t.Fatalf("%s: decode into %T: %v", file, obj, err)
	}
	back, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(back, &got); err != nil {
		t.Fatal(err)
	}
	if w, g := normalize(want), normalize(got); !reflect.DeepEqual(w, g) {
		t.Errorf("%s: round trip through %T changed the object\nwant %v\ngot  %v", file, obj, w, g)
	}
}

// DeepCopyCheck fills obj randomly (several seeds), copies it with cp and checks that the
// copy is equal and shares no memory: every leaf of the original is then changed in
// place (slices and maps are not reallocated), and the copy must not see any change.
func DeepCopyCheck[T any](t *testing.T, newObj func() *T, cp func(*T) *T) {
	t.Helper()
	for seed := int64(1); seed <= 20; seed++ {
		f := randfill.NewWithSeed(seed).NilChance(0.2).NumElements(1, 3).MaxDepth(12)
		orig := newObj()
		f.Fill(orig)
		c := cp(orig)
		if !reflect.DeepEqual(orig, c) {
			t.Fatalf("seed %d: copy differs from the original", seed)
		}
		snap := clone(reflect.ValueOf(c).Elem()).Interface()
		mutate(reflect.ValueOf(orig).Elem())
		if !reflect.DeepEqual(snap, reflect.ValueOf(c).Elem().Interface()) {
			t.Fatalf("seed %d: changing the original changed the copy (shared memory)", seed)
		}
	}
}

// mutate changes every settable leaf under v in place.
func mutate(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() {
				mutate(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			mutate(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutate(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString(v.String() + "~")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

// clone deep-copies v by reflection (exported fields; unexported ones are copied shallow).
func clone(v reflect.Value) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			p := reflect.New(v.Type().Elem())
			p.Elem().Set(clone(v.Elem()))
			out.Set(p)
		}
	case reflect.Struct:
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if out.Field(i).CanSet() {
				out.Field(i).Set(clone(v.Field(i)))
			}
		}
	case reflect.Slice:
		if !v.IsNil() {
			s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			for i := 0; i < v.Len(); i++ {
				s.Index(i).Set(clone(v.Index(i)))
			}
			out.Set(s)
		}
	case reflect.Map:
		if !v.IsNil() {
			m := reflect.MakeMapWithSize(v.Type(), v.Len())
			for _, k := range v.MapKeys() {
				m.SetMapIndex(k, clone(v.MapIndex(k)))
			}
			out.Set(m)
		}
	default:
		out.Set(v)
	}
	return out
}
