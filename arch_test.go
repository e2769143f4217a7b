package fixpoint_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/fixpoint-dev/fixpoint"

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList lists every package of the module with its direct imports and
// its transitive dependencies.
func goList(t *testing.T) map[string]listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Imports,Deps", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		pkgs[rel] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list returned %d packages, want the whole module", len(pkgs))
	}
	return pkgs
}

func thirdParty(path string) bool { return strings.Contains(strings.Split(path, "/")[0], ".") }

// matches reports whether dep is prefix or a package under it.
func matches(dep, prefix string) bool { return dep == prefix || strings.HasPrefix(dep, prefix+"/") }

// purePackages take values in and give values out: no network, queue or
// ledger, no file system, no logging.
var purePackages = []string{"extract", "validate", "ecma", "subschema", "satisfy", "internal/render", "evidence", "chunk", "merge"}

// pureNoImport are what a pure package does not import itself. (The
// standard library and the schema library link os; these are the
// packages through which a package of its own would read, write or log.)
var pureNoImport = []string{"os", "os/exec", "io/fs", "io/ioutil", "path/filepath", "syscall", "log", "log/slog", "net/http"}

// TestImportDirection enforces the layering on TRANSITIVE dependencies, so
// that a package cannot reach what it must not use through another one:
//
//   - the leaf package fixpoint (the job's own types) links the standard
//     library only;
//   - the pure packages (extract, validate and the packages validate is
//     made of) link no network, queue or ledger, no library beyond the
//     few listed, and do no file or log I/O of their own;
//   - among the schema packages imports point leafward: ecma (patterns)
//     links nothing of the module, subschema (reading a schema) links no
//     satisfy or validate, satisfy (the prover) links no validate;
//   - evidence is a pure leaf too: of the module it links only the root
//     package and subschema (the schema walker);
//   - chunk (splitting a document) is a pure leaf that links nothing of
//     the module, and merge (merging the values of a document's chunks)
//     one that links the schema packages only;
//   - rules (the schema's CEL rules) is a pure leaf too: nothing of the
//     worker, CEL and what it is built on, and no file, log or network of
//     its own;
//   - the repair step links no NATS, Postgres, net/http or provider client;
//   - llm (the provider clients) links no NATS or Postgres;
//   - budget (the lanes' budgets shared by the workers) links NATS and
//     llm, and no Postgres nor anything of the worker;
//   - store links no NATS and nothing of the drivers;
//   - queue (the job message and the JetStream side) links no Postgres,
//     no provider client and nothing of the worker;
//   - wave (the batch-delivery driver) links nothing of the worker: it
//     reaches it through an interface of its own;
//   - the simulator (sim) is linked by the commands and the dashboard's
//     Try playground only, and links nothing of the worker, the ledger,
//     the queue, the provider clients or the dashboard (it links the pure
//     rules and evidence: its truth keeps a schema's rules and is copied
//     from the task);
//   - only store uses pgx directly, only the commands run an embedded
//     NATS server, and nothing imports a command.
func TestImportDirection(t *testing.T) {
	t.Parallel()
	pkgs := goList(t)
	noNetwork := []string{"net/http", "github.com/nats-io", "github.com/jackc", mod + "/llm", mod + "/store", mod + "/pipeline"}
	forbidden := map[string][]string{
		"rules": append(slices.Clone(noNetwork), mod+"/repair", mod+"/enqueue", mod+"/queue", mod+"/wave",
			mod+"/web", mod+"/sim"),
		"repair":  append(slices.Clone(noNetwork), mod+"/sim", mod+"/enqueue"),
		"llm":     {"github.com/nats-io", "github.com/jackc", mod + "/store", mod + "/pipeline", mod + "/repair", mod + "/enqueue", mod + "/sim"},
		"store":   {"github.com/nats-io", "net/http", mod + "/pipeline", mod + "/llm", mod + "/repair", mod + "/enqueue", mod + "/sim"},
		"enqueue": {mod + "/sim"},
		// The dashboard reads the ledger through store, and nothing else.
		"web":      {"github.com/nats-io", mod + "/llm", mod + "/pipeline", mod + "/queue", mod + "/wave", mod + "/enqueue", mod + "/repair", mod + "/sim"},
		"queue":    {"github.com/jackc", mod + "/store", mod + "/llm", mod + "/repair", mod + "/pipeline", mod + "/enqueue", mod + "/sim"},
		"wave":     {mod + "/pipeline", mod + "/enqueue", mod + "/sim"},
		"pipeline": {mod + "/enqueue", mod + "/sim"},
		// budget (a lane's budget shared through NATS KV) implements
		// llm.Granter on NATS and nothing else of the worker.
		"budget": {"github.com/jackc", mod + "/store", mod + "/pipeline", mod + "/queue", mod + "/repair", mod + "/enqueue", mod + "/sim", mod + "/wave", mod + "/web"},
	}
	// The dashboard's Try playground runs the repair step, on a provider or
	// on the simulator's presets.
	forbidden["web/playground"] = []string{mod + "/enqueue"}
	forbidden["sim"] = []string{"github.com/nats-io", "github.com/jackc", mod + "/store", mod + "/pipeline", mod + "/queue",
		mod + "/wave", mod + "/enqueue", mod + "/llm", mod + "/repair", mod + "/web"}
	// Third-party libraries the pure packages may link: a JSON decoder, the
	// schema library, a backtracking engine for the patterns RE2 cannot
	// express, and Unicode normalization for enum values.
	pureAllowed := []string{"github.com/segmentio/", "github.com/santhosh-tekuri/jsonschema/", "github.com/dlclark/regexp2/", "golang.org/x/text/", "golang.org/x/sys/cpu"}
	for _, rel := range purePackages {
		if _, ok := pkgs[rel]; !ok {
			t.Errorf("pure package %s is not in the module", rel)
		}
		forbidden[rel] = noNetwork
	}
	forbidden["ecma"] = append(slices.Clone(noNetwork), mod+"/extract", mod+"/subschema", mod+"/satisfy", mod+"/validate", mod+"/internal")
	forbidden["subschema"] = append(slices.Clone(noNetwork), mod+"/satisfy", mod+"/validate")
	forbidden["satisfy"] = append(slices.Clone(noNetwork), mod+"/validate")
	forbidden["evidence"] = append(slices.Clone(noNetwork), mod+"/validate", mod+"/satisfy", mod+"/repair")
	forbidden["chunk"] = append(slices.Clone(noNetwork), mod)
	forbidden["merge"] = append(slices.Clone(noNetwork), mod+"/repair", mod+"/rules", mod+"/evidence", mod+"/chunk", mod+"/enqueue",
		mod+"/queue", mod+"/wave", mod+"/web", mod+"/sim", mod+"/budget")
	// rules links the CEL engine and what it is built on (a parser
	// generator's runtime, protobuf for CEL's types, YAML for its
	// environment files).
	rulesAllowed := append(slices.Clone(pureAllowed), "cel.dev/", "github.com/antlr4-go/antlr/", "google.golang.org/protobuf/",
		"google.golang.org/genproto/", "golang.org/x/exp/", "go.yaml.in/yaml/")
	for rel, p := range pkgs {
		pure := slices.Contains(purePackages, rel)
		for _, dep := range p.Deps {
			if rel == "" && (thirdParty(dep) && !matches(dep, mod) || dep == "net/http") {
				t.Errorf("the leaf package fixpoint links %s: it must link the standard library only", dep)
			}
			if pure && thirdParty(dep) && !strings.HasPrefix(dep, mod) &&
				!slices.ContainsFunc(pureAllowed, func(a string) bool { return strings.HasPrefix(dep, a) }) {
				t.Errorf("%s links %s: a pure package links no other library", rel, dep)
			}
			if rel == "rules" && thirdParty(dep) && !strings.HasPrefix(dep, mod) &&
				!slices.ContainsFunc(rulesAllowed, func(a string) bool { return strings.HasPrefix(dep, a) }) {
				t.Errorf("rules links %s: the pure rules package links CEL and nothing else", dep)
			}
			for _, bad := range forbidden[rel] {
				if matches(dep, bad) || strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad) {
					t.Errorf("%s links %s (directly or through another package)", rel, dep)
				}
			}
		}
		for _, imp := range p.Imports {
			if pure && slices.Contains(pureNoImport, imp) {
				t.Errorf("%s imports %s: a pure package does no file or log I/O", rel, imp)
			}
			if rel == "rules" && (imp == "os" || imp == "log" || imp == "log/slog" || imp == "net" || matches(imp, "net/http") || imp == "io/fs") {
				t.Errorf("rules imports %s: a pure package reads no file, writes no log and opens no connection", imp)
			}
			if strings.HasPrefix(imp, mod+"/cmd/") && !(strings.HasPrefix(imp, mod+"/cmd/internal/") && strings.HasPrefix(rel, "cmd/")) {
				t.Errorf("%s imports command package %s", rel, imp)
			}
			if matches(imp, "github.com/jackc/pgx/v5") && rel != "store" && !strings.HasPrefix(rel, "store/") {
				t.Errorf("%s imports %s: only store may use pgx", rel, imp)
			}
			if matches(imp, "github.com/nats-io/nats-server/v2") && !strings.HasPrefix(rel, "cmd/") {
				t.Errorf("%s imports %s: only the commands run an embedded NATS server", rel, imp)
			}
		}
	}
}

// TestLeafHasOneNamePerThing: no package re-exports the leaf's names under
// another name (an alias of a type, or a constant or variable that is only
// a leaf value), so that each thing has one name.
func TestLeafHasOneNamePerThing(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("git", "grep", "-nE", `^\s*(type\s+)?[A-Z][A-Za-z0-9]*\s*=\s*fixpoint\.[A-Z][A-Za-z0-9]*\s*$`, "--", "*.go").Output()
	if err != nil && len(out) > 0 {
		t.Fatalf("git grep: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			t.Errorf("a second name for a leaf name: %s", line)
		}
	}
}
