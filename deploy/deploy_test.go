// Package deploy holds no code: its tests check what deploy/ and the
// Dockerfile ship — the container image as scripts/image.sh builds it, and
// the Kubernetes manifest against the gateway's configuration.
package deploy

import (
	"archive/tar"
	"bufio"
	"crypto/rand"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The image's user, as the Dockerfile sets it and the manifest runs it.
const imageUser = 65532

// obj is a decoded YAML mapping, walked by path.
type obj = map[string]any

func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(obj)
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

// manifest reads deploy/kubernetes/ttfx.yaml by kind.
func manifest(t *testing.T) map[string]obj {
	t.Helper()
	f, err := os.Open("kubernetes/ttfx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byKind := map[string]obj{}
	dec := yaml.NewDecoder(f)
	for {
		var doc obj
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		byKind[doc["kind"].(string)] = doc
	}
	return byKind
}

// TestKubernetesManifest: the example deployment's configuration loads
// with the variables the Deployment sets (the store's DSN from a Secret),
// readiness reads /healthz on the port the gateway listens on, the pod
// runs as the image's user, and the grace period covers the preStop pause,
// the configuration's drain timeout and the time to end and record the
// streams left.
func TestKubernetesManifest(t *testing.T) {
	k := manifest(t)
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		if k[kind] == nil {
			t.Fatalf("no %s in deploy/kubernetes/ttfx.yaml", kind)
		}
	}
	pod := get(k["Deployment"], "spec", "template", "spec")
	c := get(pod, "containers", 0)

	// Every variable comes from the Secret; the configuration loads with them.
	env := map[string]string{}
	fromSecret := map[string]bool{}
	for _, e := range get(c, "env").([]any) {
		name := get(e, "name").(string)
		env[name] = "value-of-" + name + "-0123456789abcdef"
		fromSecret[name] = get(e, "valueFrom", "secretKeyRef", "name") == "ttfx"
		if !fromSecret[name] {
			t.Errorf("env %s is not from the Secret ttfx", name)
		}
	}
	env["TTFX_STORE_DSN"] = "postgres://ttfx:secret@postgres:5432/ttfx"
	text, _ := get(k["ConfigMap"], "data", "ttfx.yaml").(string)
	cfg, err := config.Parse([]byte(text), func(name string) string {
		if _, ok := env[name]; !ok {
			return "" // not set by the Deployment: Parse names it
		}
		return env[name]
	})
	if err != nil {
		t.Fatalf("the ConfigMap's ttfx.yaml with the Deployment's variables: %v", err)
	}
	if cfg.StoreEnv == "" || !fromSecret[cfg.StoreEnv] || !strings.HasPrefix(cfg.Store, "postgres://") {
		t.Errorf("the store's DSN should come from the Secret: store_env %q", cfg.StoreEnv)
	}

	// The configuration is where the container reads it.
	args := fmt.Sprint(get(c, "args"))
	mount := ""
	for _, m := range get(c, "volumeMounts").([]any) {
		if get(m, "name") == "config" {
			mount = get(m, "mountPath").(string)
		}
	}
	if mount == "" || !strings.Contains(args, "--config "+mount+"/ttfx.yaml") {
		t.Errorf("args %s do not read ttfx.yaml from the ConfigMap's mount %q", args, mount)
	}

	// Readiness on /healthz, on the port ttfx listens on.
	_, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	portName := ""
	for _, p := range get(c, "ports").([]any) {
		if fmt.Sprint(get(p, "containerPort")) == port {
			portName, _ = get(p, "name").(string)
		}
	}
	if portName == "" {
		t.Errorf("no container port %s (listen %s)", port, cfg.Listen)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if get(c, probe, "httpGet", "path") != "/healthz" || get(c, probe, "httpGet", "port") != portName {
			t.Errorf("%s: %v, want /healthz on port %s", probe, get(c, probe), portName)
		}
	}
	if host, _, _ := net.SplitHostPort(cfg.Listen); host == "127.0.0.1" || host == "localhost" {
		t.Errorf("listen %s: a probe from the kubelet cannot reach loopback", cfg.Listen)
	}
	if get(k["Service"], "spec", "ports", 0, "targetPort") != portName {
		t.Errorf("the Service does not target port %s", portName)
	}

	// The image's user, non-root.
	if get(pod, "securityContext", "runAsUser") != imageUser || get(pod, "securityContext", "runAsNonRoot") != true {
		t.Errorf("securityContext %v: want runAsNonRoot and user %d, the image's", get(pod, "securityContext"), imageUser)
	}

	// The grace period: the preStop pause, the drain, and 15 s to end the
	// streams left (5 s) and flush the records.
	grace, _ := get(pod, "terminationGracePeriodSeconds").(int)
	pause, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(int)
	drain := int(cfg.DrainTimeout.D() / time.Second)
	if want := pause + drain + 15; grace != want {
		t.Errorf("terminationGracePeriodSeconds %d: want the preStop pause %d s + drain_timeout %d s + 15 s = %d", grace, pause, drain, want)
	}
	if cfg.DrainTimeout.D() != config.DefaultDrainTimeout {
		t.Logf("drain_timeout %s differs from the default %s", cfg.DrainTimeout.D(), config.DefaultDrainTimeout)
	}
}

// TestContainerImage builds the image as docs/operations.md says
// (scripts/image.sh), then checks it without running a container (these
// machines cannot): its configuration (podman image inspect), its files
// (podman export: the non-root /data, the CA bundle), and its binary, copied
// out with podman create / podman cp and run here: static, and a working
// gateway.
func TestContainerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a static binary and an image (-short)")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		testenv.Missing(t, "podman", "Debian package podman; `bash scripts/ci-podman.sh` installs it")
	}
	var b [4]byte
	rand.Read(b[:])
	tag := "localhost/ttfx-test:" + hex.EncodeToString(b[:])
	run := func(name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
		}
		return out
	}
	start := time.Now()
	run("bash", "scripts/image.sh", tag)
	t.Logf("scripts/image.sh built %s in %s", tag, time.Since(start).Round(time.Second))
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", tag).Run() })

	var inspect []struct {
		Os     string
		Config struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			WorkingDir   string
			Volumes      map[string]any
			ExposedPorts map[string]any
		}
	}
	if err := json.Unmarshal(run(podman, "image", "inspect", tag), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	ic := inspect[0].Config
	if ic.User != fmt.Sprintf("%d:%d", imageUser, imageUser) || inspect[0].Os != "linux" ||
		strings.Join(ic.Entrypoint, " ") != "/usr/local/bin/ttfx" || strings.Join(ic.Cmd, " ") != "serve --listen 0.0.0.0:8080" ||
		ic.WorkingDir != "/data" || ic.Volumes["/data"] == nil || ic.ExposedPorts["8080/tcp"] == nil {
		t.Errorf("image configuration: %+v", inspect[0])
	}

	ctr := strings.TrimSpace(string(run(podman, "create", tag)))
	t.Cleanup(func() { exec.Command(podman, "rm", "-f", ctr).Run() })

	// Its files: the binary, the CA bundle, /data owned by the user; nothing else.
	exp := exec.Command(podman, "export", ctr)
	pipe, _ := exp.StdoutPipe()
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	tr := tar.NewReader(pipe)
	var bundle []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		files[name] = h
		if name == "/etc/ssl/certs/ca-certificates.crt" {
			bundle, _ = io.ReadAll(tr)
		}
	}
	exp.Wait()
	if h := files["/data"]; h == nil || h.Typeflag != tar.TypeDir || h.Uid != imageUser || h.Gid != imageUser {
		t.Errorf("/data: %+v, want a directory of %d:%d", h, imageUser, imageUser)
	}
	if h := files["/usr/local/bin/ttfx"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("/usr/local/bin/ttfx: %+v", h)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(bundle) {
		t.Errorf("/etc/ssl/certs/ca-certificates.crt holds no certificate (%d bytes)", len(bundle))
	}
	for name, h := range files {
		if h.Typeflag == tar.TypeReg && name != "/usr/local/bin/ttfx" && name != "/etc/ssl/certs/ca-certificates.crt" {
			t.Errorf("unexpected file in the image: %s", name)
		}
	}

	// Its binary, copied out: static, and it serves.
	bin := filepath.Join(t.TempDir(), "ttfx")
	run(podman, "cp", ctr+":/usr/local/bin/ttfx", bin)
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the image's binary asks for a dynamic loader: not static")
		}
	}
	ef.Close()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ttfx ") {
		t.Fatalf("the image's ttfx version: %v\n%s", err, out)
	}
	t.Logf("the image's ttfx version:\n%s", out)

	srv := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	srv.Dir = t.TempDir()
	stdout, _ := srv.StdoutPipe()
	srv.Stderr = io.Discard
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	url := ""
	sc := bufio.NewScanner(stdout)
	listening := regexp.MustCompile(`listening on (\S+)`)
	for url == "" && sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go io.Copy(io.Discard, stdout)
	if url == "" {
		t.Fatal("the image's ttfx serve printed no address")
	}
	if !strings.HasPrefix(url, "http") {
		url = "http://" + url
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz of the image's binary: %v %v", err, resp)
	}
	resp.Body.Close()
}
