package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// No Docker engine runs on the development machines or in CI, so these
// tests hold docker-compose.yml, the Dockerfile and .dockerignore to what
// `docker compose up` needs: a healthcheck on every service, start order on
// health, a restart policy, one image for the fixpoint services, a named
// volume for Postgres and the NATS server version the code is tested with.
// The compose file is read line by line (no YAML parser is in go.mod): keys
// at two spaces are services, keys at four their settings.

// composeService is one service of the compose file: its settings by key,
// each with the lines of its value (the key's own line first).
type composeService struct {
	name     string
	settings map[string][]string
}

// value is a setting's lines joined by newlines, "" when absent.
func (s composeService) value(key string) string { return strings.Join(s.settings[key], "\n") }

// readCompose returns the services and the top-level named volumes of
// docker-compose.yml.
func readCompose(t *testing.T) ([]composeService, []string) {
	t.Helper()
	data, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var services []composeService
	var volumes []string
	section, key := "", ""
	for _, raw := range strings.Split(string(data), "\n") {
		line := stripComment(raw)
		if strings.TrimSpace(line) == "" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		text := strings.TrimSpace(line)
		switch {
		case indent == 0:
			section = strings.TrimSuffix(text, ":")
		case section == "volumes" && indent == 2:
			volumes = append(volumes, strings.TrimSuffix(text, ":"))
		case section == "services" && indent == 2:
			services = append(services, composeService{name: strings.TrimSuffix(text, ":"), settings: map[string][]string{}})
		case section == "services" && len(services) > 0:
			s := services[len(services)-1]
			if indent == 4 {
				key, _, _ = strings.Cut(text, ":")
			}
			s.settings[key] = append(s.settings[key], line)
		}
	}
	if len(services) == 0 {
		t.Fatal("docker-compose.yml: no services found")
	}
	return services, volumes
}

// stripComment drops a comment that starts a line or follows a space.
func stripComment(line string) string {
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return ""
	}
	if i := strings.Index(line, " #"); i >= 0 {
		return strings.TrimRight(line[:i], " ")
	}
	return line
}

func composeByName(t *testing.T, services []composeService, name string) composeService {
	t.Helper()
	for _, s := range services {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("docker-compose.yml has no service %q", name)
	return composeService{}
}

func TestComposeHealthchecks(t *testing.T) {
	t.Parallel()
	services, _ := readCompose(t)
	for _, s := range services {
		hc := s.value("healthcheck")
		switch {
		case hc == "":
			t.Errorf("service %s has no healthcheck", s.name)
		case strings.Contains(hc, "disable: true"):
			// Only a one-shot tool (docker compose run) may go without.
			if s.value("profiles") == "" {
				t.Errorf("service %s disables its healthcheck but is not a one-shot tool (profiles)", s.name)
			}
		case !strings.Contains(hc, "test:"):
			t.Errorf("service %s: healthcheck without a test:\n%s", s.name, hc)
		}
		// Every dependency is waited for until healthy, not just started.
		dep := s.settings["depends_on"]
		for i, l := range dep {
			if i == 0 || strings.HasPrefix(l, strings.Repeat(" ", 8)) {
				continue
			}
			entry := l
			for _, next := range dep[i+1:] {
				if !strings.HasPrefix(next, strings.Repeat(" ", 8)) {
					break
				}
				entry += "\n" + next
			}
			if !strings.Contains(entry, "condition: service_healthy") {
				t.Errorf("service %s: depends_on entry without condition: service_healthy: %s", s.name, entry)
			}
		}
	}
	probes := map[string]string{
		"postgres": "pg_isready",
		"nats":     "http://127.0.0.1:8222/healthz",
		"worker":   "http://127.0.0.1:9464/",
	}
	for name, probe := range probes {
		if hc := composeByName(t, services, name).value("healthcheck"); !strings.Contains(hc, probe) {
			t.Errorf("service %s: healthcheck does not probe %s:\n%s", name, probe, hc)
		}
	}
	worker := composeByName(t, services, "worker")
	if !regexp.MustCompile(`http://127\.0\.0\.1:9464/(healthz|readyz)`).MatchString(worker.value("healthcheck")) {
		t.Errorf("worker healthcheck probes neither /healthz nor /readyz:\n%s", worker.value("healthcheck"))
	}
	if !strings.Contains(worker.value("environment"), "FIXPOINT_METRICS_ADDR: 0.0.0.0:9464") {
		t.Errorf("worker: FIXPOINT_METRICS_ADDR must be 0.0.0.0:9464 for its healthcheck and port to reach it:\n%s", worker.value("environment"))
	}
	for _, dep := range []string{"postgres", "nats"} {
		if !strings.Contains(worker.value("depends_on"), dep+":") {
			t.Errorf("worker does not wait for %s", dep)
		}
	}
	if !regexp.MustCompile(`restart: (unless-stopped|always|on-failure)`).MatchString(worker.value("restart")) {
		t.Errorf("worker has no restart policy: %q", worker.value("restart"))
	}
	nats := composeByName(t, services, "nats")
	if !strings.Contains(nats.value("command"), `"-m", "8222"`) {
		t.Errorf("nats must serve monitoring (/healthz) on 8222 (-m 8222): %s", nats.value("command"))
	}
}

// TestComposeOneImage: the fixpoint services run one image, built once.
func TestComposeOneImage(t *testing.T) {
	t.Parallel()
	services, _ := readCompose(t)
	var builders []composeService
	for _, s := range services {
		if s.value("build") != "" {
			builders = append(builders, s)
		}
	}
	if len(builders) != 1 {
		t.Fatalf("%d services have build:, want exactly one", len(builders))
	}
	image := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(builders[0].value("image")), "image:"))
	if image == "" {
		t.Fatalf("service %s builds without an image: name for the others to use", builders[0].name)
	}
	for _, s := range services {
		if s.name == "postgres" || s.name == "nats" || s.name == builders[0].name {
			continue
		}
		if got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s.value("image")), "image:")); got != image {
			t.Errorf("service %s runs image %q, want the built %q", s.name, got, image)
		}
		if !strings.Contains(s.value("pull_policy"), "never") {
			t.Errorf("service %s would pull %s from a registry: want pull_policy: never", s.name, image)
		}
		if hc := s.value("healthcheck"); strings.Contains(hc, "test:") && !strings.Contains(hc, `"/usr/local/bin/busybox"`) {
			t.Errorf("service %s: the image has no shell or HTTP client; probe with /usr/local/bin/busybox:\n%s", s.name, hc)
		}
	}
	if hc := builders[0].value("healthcheck"); !strings.Contains(hc, `"/usr/local/bin/busybox", "wget"`) {
		t.Errorf("service %s: probe with /usr/local/bin/busybox wget:\n%s", builders[0].name, hc)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^COPY --from=\S+ /bin/busybox /usr/local/bin/busybox$`).Match(docker) {
		t.Error("Dockerfile does not put busybox at /usr/local/bin/busybox for the healthchecks")
	}
	if !regexp.MustCompile(`(?m)^FROM busybox:\S+-musl AS`).Match(docker) {
		t.Error("Dockerfile: take busybox from a musl (static) busybox image; the runtime image has no libc to link against")
	}
}

// TestComposeVolumes: Postgres keeps its data in a named volume, and every
// named volume a service mounts is declared.
func TestComposeVolumes(t *testing.T) {
	t.Parallel()
	services, volumes := readCompose(t)
	pg := composeByName(t, services, "postgres").value("volumes")
	m := regexp.MustCompile(`"([A-Za-z0-9_-]+):/var/lib/postgresql/data"`).FindStringSubmatch(pg)
	if m == nil {
		t.Fatalf("postgres data is not in a named volume: %q", pg)
	}
	mount := regexp.MustCompile(`"([A-Za-z0-9][A-Za-z0-9_.-]*):/`)
	for _, s := range services {
		for _, v := range mount.FindAllStringSubmatch(s.value("volumes"), -1) {
			if !slices.Contains(volumes, v[1]) {
				t.Errorf("service %s mounts volume %s, which the top-level volumes: does not declare (%v)", s.name, v[1], volumes)
			}
		}
	}
}

// TestComposeNATSVersion: the NATS image is the server version go.mod
// tests the code with.
func TestComposeNATSVersion(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require github.com/nats-io/nats-server/v2")
	}
	services, _ := readCompose(t)
	want := "image: nats:" + string(m[1]) + "-alpine"
	if got := strings.TrimSpace(composeByName(t, services, "nats").value("image")); got != want {
		t.Errorf("nats %q, want %q (keep it in step with go.mod)", got, want)
	}
}

func TestDockerignore(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, want := range []string{".git", "bin/", ".fixpoint/", "**/*.test", "**/*.prof"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}
