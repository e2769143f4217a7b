package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/configdoc"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// No Kubernetes cluster runs on the development machines or in CI, so
// these tests hold the manifests of deploy/ to what the commands take:
// every file parses and is in a kustomization; every flag a container
// passes to a fixpoint command is one it accepts (the worker's are parsed
// by its own flag set, the others' by the built command); every variable
// is one its command's --help names; secrets come from the Secret, never
// inline; one image runs the fixpoint commands, by the paths the
// Dockerfile puts them at; and KEDA's scaler names the stream and consumer
// the workers use, on the NATS monitoring port, with a lag threshold the
// workers' own jobs in flight cannot reach.

const deployDir = "../../deploy"

// object is one Kubernetes object of deploy/, as parsed.
type object struct {
	file string
	doc  map[string]any
	// patch: the object is a kustomization's patch of another; its
	// containers take the patched ones' image, command and arguments.
	patch bool
}

func (o object) kind() string { return str(o.doc, "kind") }
func (o object) name() string { return str(o.doc, "metadata", "name") }

// get walks maps and lists (an int key indexes a list) and returns what is
// there, nil when the path does not exist.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	switch s := get(v, path...).(type) {
	case string:
		return s
	case int:
		return strconv.Itoa(s)
	case bool:
		return strconv.FormatBool(s)
	}
	return ""
}

func list(v any, path ...any) []any { l, _ := get(v, path...).([]any); return l }

func strs(v any, path ...any) []string {
	var out []string
	for _, x := range list(v, path...) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// readDeploy parses every YAML file of deploy/: the objects, and the
// kustomizations by directory.
func readDeploy(t *testing.T) ([]object, map[string]map[string]any) {
	t.Helper()
	var objects []object
	kustomizations := map[string]map[string]any{}
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: document %d: %w", path, i+1, err)
			}
			if doc == nil {
				continue
			}
			if filepath.Base(path) == "kustomization.yaml" {
				kustomizations[filepath.Dir(path)] = doc
				continue
			}
			o := object{file: path, doc: doc}
			if str(doc, "apiVersion") == "" || o.kind() == "" || o.name() == "" {
				return fmt.Errorf("%s: document %d has no apiVersion, kind or metadata.name", path, i+1)
			}
			objects = append(objects, o)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) == 0 || len(kustomizations) == 0 {
		t.Fatalf("deploy/: %d objects, %d kustomizations", len(objects), len(kustomizations))
	}
	patches := map[string]bool{}
	for dir, k := range kustomizations {
		for _, p := range list(k, "patches") {
			patches[filepath.Clean(filepath.Join(dir, str(p, "path")))] = true
		}
	}
	for i := range objects {
		if objects[i].patch = patches[filepath.Clean(objects[i].file)]; objects[i].patch {
			completePatch(t, objects, objects[i])
		}
	}
	return objects, kustomizations
}

// completePatch gives each container of patch the image, command and
// arguments of the patched object's container of its name.
func completePatch(t *testing.T, objects []object, patch object) {
	t.Helper()
	target := find(t, objects, patch.kind(), patch.name())
	for _, pc := range list(patch.doc, "spec", "template", "spec", "containers") {
		pm := pc.(map[string]any)
		for _, tc := range list(target.doc, "spec", "template", "spec", "containers") {
			if str(tc, "name") != str(pc, "name") {
				continue
			}
			for _, k := range []string{"image", "command", "args"} {
				if _, ok := pm[k]; !ok {
					pm[k] = get(tc, k)
				}
			}
		}
	}
}

// find returns the one object of kind and name.
func find(t *testing.T, objects []object, kind, name string) object {
	t.Helper()
	for _, o := range objects {
		if o.kind() == kind && o.name() == name && !o.patch {
			return o
		}
	}
	t.Fatalf("deploy/ has no %s %s", kind, name)
	return object{}
}

// container is one container of a workload.
type container struct {
	owner string // kind/name
	spec  any
}

func (c container) env(name string) (value string, ref any, ok bool) {
	for _, e := range list(c.spec, "env") {
		if str(e, "name") == name {
			return str(e, "value"), get(e, "valueFrom"), true
		}
	}
	return "", nil, false
}

// containers lists the containers of every workload (pod templates of
// Deployments, StatefulSets and Jobs).
func containers(objects []object) []container {
	var out []container
	for _, o := range objects {
		for _, c := range list(o.doc, "spec", "template", "spec", "containers") {
			out = append(out, container{owner: o.kind() + "/" + o.name(), spec: c})
		}
	}
	return out
}

// TestDeployKustomizations: every manifest is in a kustomization, and
// every path a kustomization names exists.
func TestDeployKustomizations(t *testing.T) {
	t.Parallel()
	_, ks := readDeploy(t)
	named := map[string]bool{}
	for dir, k := range ks {
		for _, field := range []string{"resources", "components"} {
			for _, r := range strs(k, field) {
				p := filepath.Clean(filepath.Join(dir, r))
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s/kustomization.yaml: %s %s: %v", dir, field, r, err)
				}
				named[p] = true
			}
		}
		for _, p := range list(k, "patches") {
			path := filepath.Clean(filepath.Join(dir, str(p, "path")))
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s/kustomization.yaml: patch %s: %v", dir, str(p, "path"), err)
			}
			named[path] = true
		}
	}
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") && filepath.Base(path) != "kustomization.yaml" && !named[filepath.Clean(path)] {
			t.Errorf("%s is in no kustomization", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// secretEnv are the variables whose values are secrets: each comes from
// the fixpoint-secrets Secret. Every provider's key is one.
var secretEnv = append([]string{"DATABASE_URL", "FIXPOINT_ADMIN_TOKEN", "POSTGRES_PASSWORD",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}, providerKeyEnv()...)

// providerKeyEnv are the key variables of the provider table's rows.
func providerKeyEnv() []string {
	var out []string
	for _, p := range llm.Providers() {
		if p.KeyEnv != "" {
			out = append(out, p.KeyEnv)
		}
	}
	return out
}

// TestDeployReadsEveryProvidersKey: the worker's deployment reads each
// provider's key, optional, from the fixpoint-secrets Secret, so a row
// added to the table reaches a cluster too.
func TestDeployReadsEveryProvidersKey(t *testing.T) {
	t.Parallel()
	objects, _ := readDeploy(t)
	missing := providerKeyEnv()
	for _, c := range containers(objects) {
		if str(c.spec, "name") != "worker" {
			continue
		}
		// The worker's container in the base; a component's patch of it
		// reads no key and is passed over.
		var lacks []string
		for _, k := range providerKeyEnv() {
			read := false
			for _, e := range list(c.spec, "env") {
				ref := get(e, "valueFrom", "secretKeyRef")
				read = read || str(e, "name") == k && str(ref, "name") == "fixpoint-secrets" && str(ref, "key") == k && get(ref, "optional") == true
			}
			if !read {
				lacks = append(lacks, k)
			}
		}
		if len(lacks) < len(missing) {
			missing = lacks
		}
	}
	if len(missing) > 0 {
		t.Errorf("the worker's container in deploy/ does not read %v, optional, from the fixpoint-secrets Secret", missing)
	}
}

// buildDeployed builds the commands the manifests run into a directory.
func buildDeployed(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var pkgs []string
	for _, c := range []string{"worker", "report", "simllm"} {
		pkgs = append(pkgs, "github.com/fixpoint-dev/fixpoint/cmd/"+c)
	}
	if out, err := exec.Command("go", append([]string{"build", "-o", dir}, pkgs...)...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// TestDeployCommands: each fixpoint container runs a command the image
// has, with flags the command accepts and variables its --help names; the
// other images are the versions the code is tested with.
func TestDeployCommands(t *testing.T) {
	t.Parallel()
	objects, ks := readDeploy(t)
	bin := buildDeployed(t)
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(docker, []byte("-o /out/ ./cmd/...")) || !bytes.Contains(docker, []byte("COPY --from=build /out/ /usr/local/bin/")) {
		t.Fatal("Dockerfile no longer builds every command into /usr/local/bin: the manifests' commands assume it")
	}
	var envNames []string
	for _, e := range configdoc.Env {
		envNames = append(envNames, e.Name)
	}
	fixpoint := 0
	for _, c := range containers(objects) {
		image := str(c.spec, "image")
		switch {
		case strings.HasPrefix(image, "nats:"):
			checkNATSImage(t, c.owner, image)
			continue
		case strings.HasPrefix(image, "postgres:"):
			continue
		case image != "fixpoint":
			t.Errorf("%s runs image %q: the fixpoint commands run the one image, named fixpoint (the overlays set its registry and tag)", c.owner, image)
			continue
		}
		fixpoint++
		cmd := strs(c.spec, "command")
		if len(cmd) != 1 || !strings.HasPrefix(cmd[0], "/usr/local/bin/") {
			t.Errorf("%s: command %q, want one of /usr/local/bin/<command>", c.owner, cmd)
			continue
		}
		name := strings.TrimPrefix(cmd[0], "/usr/local/bin/")
		if _, err := os.Stat(filepath.Join("..", name, "main.go")); err != nil {
			t.Errorf("%s: %s is no command of cmd/: %v", c.owner, cmd[0], err)
			continue
		}
		args := strs(c.spec, "args")
		checkArgs(t, c, bin, name, args)
		help, err := configdoc.RunHelp(t.Context(), bin, helpLine(name, args)...)
		if err != nil {
			t.Errorf("%s: %v", c.owner, err)
			continue
		}
		named := configdoc.EnvNamed(help)
		for _, e := range list(c.spec, "env") {
			v := str(e, "name")
			switch {
			case slices.Contains(named, v):
			case referenced(c, v):
				// Only there for another variable's $(v).
			case slices.Contains(envNames, v):
				t.Errorf("%s: %s is not one %s reads (its --help names %v)", c.owner, v, strings.Join(helpLine(name, args), " "), named)
			default:
				t.Errorf("%s: %s is in no command's --help nor docs/configuration.md", c.owner, v)
			}
		}
	}
	if fixpoint < 3 {
		t.Errorf("%d fixpoint containers (migrate, worker, dashboard at least)", fixpoint)
	}
	for dir, k := range ks {
		for _, img := range list(k, "images") {
			if str(img, "name") != "fixpoint" {
				t.Errorf("%s/kustomization.yaml: image %q, want the fixpoint image the manifests name", dir, str(img, "name"))
			}
		}
	}
}

// helpLine is the command line whose --help documents a container's
// command: the command, and its subcommand when the first argument is one.
func helpLine(name string, args []string) []string {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return []string{name, args[0]}
	}
	return []string{name}
}

// referenced reports whether another variable of c uses v as $(v).
func referenced(c container, v string) bool {
	for _, e := range list(c.spec, "env") {
		if strings.Contains(str(e, "value"), "$("+v+")") {
			return true
		}
	}
	return false
}

// checkArgs runs the container's command line with --help after its
// arguments: a flag the command does not have, or a value it refuses, is
// a usage error (exit 2) before the help.
func checkArgs(t *testing.T, c container, bin, name string, args []string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), append(slices.Clone(args), "--help")...)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %s %s: %v\n%s", c.owner, name, strings.Join(args, " "), err, out)
	}
}

func checkNATSImage(t *testing.T, owner, image string) {
	t.Helper()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require github.com/nats-io/nats-server/v2")
	}
	if want := "nats:" + string(m[1]) + "-alpine"; image != want {
		t.Errorf("%s runs %s, want %s (keep it in step with go.mod)", owner, image, want)
	}
}

// workerRun parses the worker Deployment's arguments with worker run's own
// flag set.
func workerRun(t *testing.T, objects []object) (*runFlags, container) {
	t.Helper()
	w := find(t, objects, "Deployment", "fixpoint-worker")
	c := container{owner: "Deployment/fixpoint-worker", spec: get(w.doc, "spec", "template", "spec", "containers", 0)}
	args := strs(c.spec, "args")
	if len(args) == 0 || args[0] != "run" || !slices.Equal(strs(c.spec, "command"), []string{"/usr/local/bin/worker"}) {
		t.Fatalf("the worker Deployment runs %q %q, want /usr/local/bin/worker run", strs(c.spec, "command"), args)
	}
	f := newRunFlags(io.Discard)
	if err := parseFlags(f.fs, args[1:]); err != nil {
		t.Fatalf("worker run %s: %v", strings.Join(args[1:], " "), err)
	}
	return f, c
}

// TestDeployWorker: the workers reach every NATS node, serve their probes
// where the probes look, are given the time their grace needs, and run the
// migration Job's ledger; with a stream replicas flag, the stream is kept
// on every node of the cluster.
func TestDeployWorker(t *testing.T) {
	t.Parallel()
	objects, _ := readDeploy(t)
	f, c := workerRun(t, objects)
	nats := find(t, objects, "StatefulSet", "nats")
	replicas, _ := get(nats.doc, "spec", "replicas").(int)
	if replicas != 3 {
		t.Errorf("the NATS StatefulSet has %d replicas, want a cluster of 3", replicas)
	}
	conf := str(find(t, objects, "ConfigMap", "nats-config").doc, "data", "nats.conf")
	headless := str(nats.doc, "spec", "serviceName")
	url, _, _ := c.env("NATS_URL")
	if err := natsconn.CheckURL(url); err != nil {
		t.Errorf("worker NATS_URL: %v", err)
	}
	for i := range replicas {
		pod := fmt.Sprintf("nats-%d.%s", i, headless)
		if !strings.Contains(conf, "nats://"+pod+":6222") {
			t.Errorf("nats.conf routes lack %s:6222", pod)
		}
		if !strings.Contains(url, "nats://"+pod+":4222") {
			t.Errorf("worker NATS_URL %q lacks %s: a worker must reach the queue with any one node down", url, pod)
		}
	}
	for _, want := range []string{"server_name: $POD_NAME", "http_port: 8222", "jetstream {"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nats.conf lacks %q", want)
		}
	}
	for _, name := range []string{"stream-replicas", "replicas"} {
		if fl := f.fs.Lookup(name); fl != nil && fl.Value.String() != strconv.Itoa(replicas) {
			t.Errorf("worker --%s %s: the job stream must be kept on the %d NATS nodes (pass --%s=%d)", name, fl.Value, replicas, name, replicas)
		}
	}

	if addr, _, _ := c.env("FIXPOINT_METRICS_ADDR"); addr != "0.0.0.0:9464" {
		t.Errorf("worker FIXPOINT_METRICS_ADDR %q: probes and scrapes need 0.0.0.0:9464", addr)
	}
	ports := map[string]int{}
	for _, p := range list(c.spec, "ports") {
		ports[str(p, "name")], _ = get(p, "containerPort").(int)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		port := str(c.spec, probe, "httpGet", "port")
		if str(c.spec, probe, "httpGet", "path") != path || (ports[port] != 9464 && port != "9464") {
			t.Errorf("worker %s: %s on port %s, want %s on 9464", probe, str(c.spec, probe, "httpGet", "path"), port, path)
		}
	}
	tgp, _ := get(find(t, objects, "Deployment", "fixpoint-worker").doc, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
	if need := f.cfg.Grace + 10*time.Second; time.Duration(tgp)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d: --grace %s and the ledger's 10s need more than %s", tgp, f.cfg.Grace, need)
	}
	if spill, _, _ := c.env("FIXPOINT_SPILL_DIR"); !mounted(c, spill) {
		t.Errorf("worker FIXPOINT_SPILL_DIR %q is on no volume (the root file system is read-only)", spill)
	}

	job := find(t, objects, "Job", "fixpoint-migrate")
	mc := container{owner: "Job/fixpoint-migrate", spec: get(job.doc, "spec", "template", "spec", "containers", 0)}
	if !slices.Equal(strs(mc.spec, "command"), []string{"/usr/local/bin/worker"}) || !slices.Equal(strs(mc.spec, "args"), []string{"migrate"}) {
		t.Errorf("the migration Job runs %q %q, want worker migrate", strs(mc.spec, "command"), strs(mc.spec, "args"))
	}
	_, wref, _ := c.env("DATABASE_URL")
	_, mref, _ := mc.env("DATABASE_URL")
	if fmt.Sprint(wref) != fmt.Sprint(mref) || mref == nil {
		t.Errorf("the migration Job's DATABASE_URL (%v) is not the workers' (%v)", mref, wref)
	}
}

// TestDeployNATSConfig reads nats.conf with nats-server's own parser (as
// pod nats-0): the ports the Services and KEDA use, JetStream on its
// volume, a route to each pod, and room for a job message.
func TestDeployNATSConfig(t *testing.T) {
	t.Parallel()
	objects, _ := readDeploy(t)
	conf := str(find(t, objects, "ConfigMap", "nats-config").doc, "data", "nats.conf")
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(conf, "$POD_NAME", "nats-0")), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	nats := find(t, objects, "StatefulSet", "nats")
	var dataMount string
	for _, m := range list(nats.doc, "spec", "template", "spec", "containers", 0, "volumeMounts") {
		if str(m, "name") == "data" {
			dataMount = str(m, "mountPath")
		}
	}
	switch {
	case opts.ServerName != "nats-0":
		t.Errorf("server_name %q, want the pod's name", opts.ServerName)
	case opts.Port != 4222 || opts.HTTPPort != 8222 || opts.Cluster.Port != 6222:
		t.Errorf("ports client %d, monitoring %d, cluster %d; the Services and KEDA use 4222, 8222, 6222", opts.Port, opts.HTTPPort, opts.Cluster.Port)
	case !opts.JetStream || opts.StoreDir != dataMount:
		t.Errorf("JetStream %v in %q, want it on in the data volume %q", opts.JetStream, opts.StoreDir, dataMount)
	case len(opts.Routes) != 3:
		t.Errorf("%d routes, want one to each of the 3 pods", len(opts.Routes))
	case opts.MaxPayload < queue.MaxMsgSizeDefault+64<<10:
		t.Errorf("max_payload %d: a job message may be %d bytes, and its headers come on top", opts.MaxPayload, queue.MaxMsgSizeDefault)
	}
}

// mounted reports whether dir is on one of c's volume mounts.
func mounted(c container, dir string) bool {
	for _, m := range list(c.spec, "volumeMounts") {
		if p := str(m, "mountPath"); dir != "" && (dir == p || strings.HasPrefix(dir, strings.TrimSuffix(p, "/")+"/")) {
			return true
		}
	}
	return false
}

// TestDeployKEDA: the ScaledObject scales the worker Deployment on the
// lag of the stream and consumer the workers use, read from the NATS
// monitoring port; its lag threshold is above the jobs one worker holds in
// flight (else KEDA adds workers for jobs already running), and its most
// workers hold no more than the consumer lets be in flight.
func TestDeployKEDA(t *testing.T) {
	t.Parallel()
	objects, ks := readDeploy(t)
	f, _ := workerRun(t, objects)
	so := find(t, objects, "ScaledObject", "fixpoint-worker")
	if target := str(so.doc, "spec", "scaleTargetRef", "name"); target != "fixpoint-worker" {
		t.Errorf("ScaledObject scales %q, want the worker Deployment", target)
	}
	triggers := list(so.doc, "spec", "triggers")
	if len(triggers) != 1 || str(triggers[0], "type") != "nats-jetstream" {
		t.Fatalf("ScaledObject triggers %v, want one nats-jetstream", triggers)
	}
	md := get(triggers[0], "metadata")
	q := f.cfg.Queue.WithDefaults()
	if s, c := str(md, "stream"), str(md, "consumer"); s != q.Stream || c != q.Consumer {
		t.Errorf("KEDA reads stream %q consumer %q; the workers use stream %q consumer %q", s, c, q.Stream, q.Consumer)
	}
	if str(md, "account") != "$G" {
		t.Errorf("KEDA account %q: without accounts NATS puts every stream in $G", str(md, "account"))
	}
	endpoint := str(md, "natsServerMonitoringEndpoint")
	host, port, ok := strings.Cut(endpoint, ":")
	svc, ns, _ := strings.Cut(host, ".")
	if !ok || port != "8222" {
		t.Errorf("natsServerMonitoringEndpoint %q: want host:8222, nats-server's monitoring port", endpoint)
	}
	found := false
	for _, p := range list(find(t, objects, "Service", svc).doc, "spec", "ports") {
		found = found || str(p, "port") == "8222"
	}
	if !found {
		t.Errorf("Service %s has no port 8222 for KEDA", svc)
	}
	if want := str(ks[filepath.Join(deployDir, "base")], "namespace"); !strings.HasPrefix(ns, want+".") {
		t.Errorf("natsServerMonitoringEndpoint %q is not in namespace %s", endpoint, want)
	}
	lag, err := strconv.Atoi(str(md, "lagThreshold"))
	if err != nil {
		t.Fatalf("lagThreshold %q: %v", str(md, "lagThreshold"), err)
	}
	held := f.cfg.Concurrency + f.ahead
	if f.ahead < 0 {
		t.Fatalf("the worker's --jobs-ahead is the default: give it, so the jobs a worker holds are known here")
	}
	if lag <= held {
		t.Errorf("lagThreshold %d is not above the %d jobs a worker holds (--concurrency %d + --jobs-ahead %d): KEDA would add workers for running jobs",
			lag, held, f.cfg.Concurrency, f.ahead)
	}
	maxReplicas, _ := get(so.doc, "spec", "maxReplicaCount").(int)
	if maxReplicas*held > q.MaxAckPending {
		t.Errorf("maxReplicaCount %d workers of %d jobs each is over the consumer's max ack pending %d: the last ones would idle",
			maxReplicas, held, q.MaxAckPending)
	}
	if minReplicas, _ := get(so.doc, "spec", "minReplicaCount").(int); minReplicas < 1 {
		t.Errorf("minReplicaCount %d: a worker must keep recording dead jobs' advisories while the queue is idle", minReplicas)
	}
}
