package layers

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testExceptions are the upward imports that test files (and only test
// files) of a package may make, each with its reason. An entry that no test
// file uses any more fails the test, so the list only shrinks.
var testExceptions = map[edge]string{
	{"internal/sharestore", "internal/codec"}: "a share store is tested with real shares, and the codec (pure, no I/O) is what makes them",
	{"internal/node", "internal/codec"}:       "a node is tested with real shares, and the codec (pure, no I/O) is what makes them",
}

// edge is an import of package to by package from, both directories
// relative to the module root.
type edge struct{ from, to string }

// pkgImports is what one directory's Go files import from the module.
type pkgImports struct {
	prod map[string][]string // imported dir → files (not _test.go) that import it
	test map[string][]string // imported dir → _test.go files that import it
}

// TestImportsGoDown reads every Go file of the module and fails on every
// import that goes up the layers, and on every package without a layer.
func TestImportsGoDown(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs, err := scan(root, module)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < len(packages) {
		t.Fatalf("found %d packages under %s, fewer than the %d of the table: wrong root?", len(pkgs), root, len(packages))
	}
	for _, v := range check(pkgs, Of, Dirs(), testExceptions) {
		t.Error(v)
	}
}

// TestCheckFindsViolations feeds check a made-up module with one of each
// violation, so that TestImportsGoDown passing means something.
func TestCheckFindsViolations(t *testing.T) {
	table := map[string]Layer{
		"internal/low":     Identity,
		"internal/mid":     Objects,
		"internal/high":    FrontEnds,
		"internal/support": TestSupport,
		"internal/gone":    Lab,
	}
	of := func(dir string) (Layer, bool) {
		if strings.HasPrefix(dir, "cmd/") {
			return Command, true
		}
		l, ok := table[dir]
		return l, ok
	}
	dirs := []string{"internal/low", "internal/mid", "internal/high", "internal/support", "internal/gone"}
	imp := func(to ...string) map[string][]string {
		m := map[string][]string{}
		for _, d := range to {
			m[d] = []string{"x.go"}
		}
		return m
	}
	pkgs := map[string]*pkgImports{
		"internal/low":     {prod: imp("internal/mid"), test: imp("internal/support")}, // upward import
		"internal/mid":     {prod: imp("internal/low", "internal/support"), test: imp("internal/high")},
		"internal/high":    {prod: imp("internal/mid", "internal/low"), test: imp("internal/mid")},
		"internal/support": {prod: imp("internal/high")},
		"internal/new":     {prod: imp()}, // no layer
		"cmd/tool":         {prod: imp("internal/high", "internal/support")},
	}
	exceptions := map[edge]string{
		{"internal/high", "internal/low"}: "stale: high's tests do not import low",
	}
	got := check(pkgs, of, dirs, exceptions)
	want := []string{
		`internal/low (0 identity) imports internal/mid (3 objects), a layer above it, in x.go`,
		`internal/mid (3 objects) imports test support internal/support in x.go, which is not a test file`,
		`internal/mid (3 objects) imports internal/high (5 front ends), a layer above it, in x.go`,
		`internal/new has no layer: give it one in layers.go`,
		`internal/gone has a layer in layers.go but no Go files`,
		`test exception internal/high → internal/low is not used any more: remove it`,
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("check missed: %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("check found %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

// check returns one line per violation of the rules in the package comment.
func check(pkgs map[string]*pkgImports, of func(string) (Layer, bool), dirs []string, exceptions map[edge]string) []string {
	var out []string
	used := map[edge]bool{}
	for _, dir := range sortedKeys(pkgs) {
		p := pkgs[dir]
		from, ok := of(dir)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no layer: give it one in layers.go", dir))
			continue
		}
		for _, isTest := range []bool{false, true} {
			imports := p.prod
			if isTest {
				imports = p.test
			}
			for _, to := range sortedKeys(imports) {
				files := strings.Join(imports[to], ", ")
				l, ok := of(to)
				switch {
				case !ok:
					// Reported once, as a package without a layer.
				case from == Command:
				case l == TestSupport:
					if !isTest && from != TestSupport {
						out = append(out, fmt.Sprintf("%s (%v) imports test support %s in %s, which is not a test file", dir, from, to, files))
					}
				case l == Command:
					out = append(out, fmt.Sprintf("%s imports command %s in %s", dir, to, files))
				case from == TestSupport:
					if l >= Lab {
						out = append(out, fmt.Sprintf("test support %s imports %s (%v) in %s: test support stays below the lab", dir, to, l, files))
					}
				case l > from:
					if isTest && exceptions[edge{dir, to}] != "" {
						used[edge{dir, to}] = true
						continue
					}
					out = append(out, fmt.Sprintf("%s (%v) imports %s (%v), a layer above it, in %s", dir, from, to, l, files))
				}
			}
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		if _, ok := pkgs[d]; !ok {
			out = append(out, fmt.Sprintf("%s has a layer in layers.go but no Go files", d))
		}
	}
	for _, e := range sortedKeys(exceptions) {
		if !used[e] {
			out = append(out, fmt.Sprintf("test exception %s → %s is not used any more: remove it", e.from, e.to))
		}
	}
	return out
}

// scan parses the import clauses of every Go file under root and returns
// each package directory's imports of the module's own packages.
func scan(root, module string) (map[string]*pkgImports, error) {
	pkgs := map[string]*pkgImports{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		p := pkgs[dir]
		if p == nil {
			p = &pkgImports{prod: map[string][]string{}, test: map[string][]string{}}
			pkgs[dir] = p
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		imports := p.prod
		if strings.HasSuffix(name, "_test.go") {
			imports = p.test
		}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if to, ok := strings.CutPrefix(ip, module+"/"); ok && to != dir {
				imports[to] = append(imports[to], name)
			}
		}
		return nil
	})
	return pkgs, err
}

// moduleRoot returns the directory of the go.mod above the test's working
// directory and the module path it declares.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if errors.Is(err, fs.ErrNotExist) {
			dir = filepath.Dir(dir)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
				return dir, strings.Trim(strings.TrimSpace(m), `"`)
			}
		}
		t.Fatalf("%s/go.mod declares no module", dir)
	}
	t.Fatal("no go.mod above the test's directory")
	return "", ""
}

// sortedKeys returns m's keys in order, so that reports are stable.
func sortedKeys[K interface{ comparable }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return keys
}
