package fixpoint_test

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakeFuzzRunsEveryTarget: make fuzz runs every Fuzz function of the
// module in its own package, and docs/development.md's table lists the
// same. A target left out is never fuzzed, and one listed under another
// package is worse: go test -fuzz finds nothing there and passes.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("git", "grep", "-nE", `^func Fuzz[A-Za-z0-9_]*\(`, "--", "*_test.go").Output()
	if err != nil {
		t.Fatalf("git grep: %v", err)
	}
	var defined []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		file, rest, _ := strings.Cut(line, ":")
		name := regexp.MustCompile(`^\d+:func (Fuzz[A-Za-z0-9_]*)\(`).FindStringSubmatch(rest)
		defined = append(defined, path.Dir(file)+" "+name[1])
	}
	if len(defined) < 10 {
		t.Fatalf("found %d fuzz targets, want the module's", len(defined))
	}

	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, m := range regexp.MustCompile(`(?m)^\tfor t in ([^;]+); do \$\(GO\) test -run '\^\$\$' -fuzz "\^\$\$t\$\$" -fuzztime \S+ \./(\S+) \|\| exit 1; done$`).FindAllStringSubmatch(string(mk), -1) {
		for _, target := range strings.Fields(m[1]) {
			made = append(made, m[2]+" "+target)
		}
	}

	doc, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	_, fuzzing, _ := strings.Cut(string(doc), "## Fuzzing")
	fuzzing, _, _ = strings.Cut(fuzzing, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (.+) \\|$").FindAllStringSubmatch(fuzzing, -1) {
		for _, target := range regexp.MustCompile("`(Fuzz[A-Za-z0-9_]*)`").FindAllStringSubmatch(m[2], -1) {
			documented = append(documented, m[1]+" "+target[1])
		}
	}

	slices.Sort(defined)
	for what, listed := range map[string][]string{"make fuzz": made, "docs/development.md": documented} {
		slices.Sort(listed)
		for _, d := range defined {
			if !slices.Contains(listed, d) {
				t.Errorf("%s does not run %s (package, target; make fuzz runs a package's targets on one for-loop line)", what, d)
			}
		}
		for _, l := range listed {
			if !slices.Contains(defined, l) {
				t.Errorf("%s lists %s, which is no fuzz target of that package", what, l)
			}
		}
	}
}
