package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manifestKinds: every file of kubernetes/ and the kinds it holds, in order.
var manifestKinds = map[string][]string{
	"single.yaml":                  {"Deployment", "Service"},
	"kserve-servingruntime.yaml":   {"ServingRuntime"},
	"kserve-inferenceservice.yaml": {"InferenceService"},
	"lws-head-workers.yaml":        {"LeaderWorkerSet", "Service"},
	"lws-pd.yaml":                  {"LeaderWorkerSet", "Service"},
	"workers-dns.yaml":             {"Deployment", "Deployment", "Deployment", "Service", "Service"},
	"hpa-decode.yaml":              {"HorizontalPodAutoscaler"},
}

// manifestSets: the files deployed together (checked as one set).
var manifestSets = [][]string{
	{"single.yaml"},
	{"kserve-servingruntime.yaml", "kserve-inferenceservice.yaml"},
	{"lws-head-workers.yaml"},
	{"lws-pd.yaml"},
	{"workers-dns.yaml", "hpa-decode.yaml"},
}

func readManifests(t *testing.T, files ...string) []object {
	t.Helper()
	var all []object
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(f, b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		all = append(all, objs...)
	}
	return all
}

func kinds(objs []object) []string {
	var k []string
	for _, o := range objs {
		k = append(k, o.kind)
	}
	return k
}

// TestManifestsDecodeStrictly: every file in kubernetes/ is listed and
// decodes into the upstream types with no unknown field.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) != len(manifestKinds) {
		t.Errorf("kubernetes/ has %d files, manifestKinds lists %d: list every manifest", len(files), len(manifestKinds))
	}
	for _, path := range files {
		f := filepath.Base(path)
		t.Run(f, func(t *testing.T) {
			want, ok := manifestKinds[f]
			if !ok {
				t.Fatalf("%s is not in manifestKinds", f)
			}
			if got := kinds(readManifests(t, f)); !slices.Equal(got, want) {
				t.Errorf("kinds %v, want %v", got, want)
			}
		})
	}
}

// TestManifestsCrossReferences: flags, ports, probes, drain, Services.
func TestManifestsCrossReferences(t *testing.T) {
	fs := loadFlags(t)
	for _, set := range manifestSets {
		t.Run(strings.Join(set, "+"), func(t *testing.T) {
			for _, err := range check(readManifests(t, set...), fs) {
				t.Error(err)
			}
		})
	}
}

// TestCheckCatches: the checks find the mistakes they are for.
func TestCheckCatches(t *testing.T) {
	fs := loadFlags(t)
	for _, tc := range []struct {
		name, old, new, want string
		decode               bool     // the mistake is found when decoding
		files                []string // default: single.yaml
	}{
		{"unknown field", "readinessProbe:", "readinesProbe:", "unknown field", true, nil},
		{"misplaced field", "          ports:\n", "          replicas: 1\n          ports:\n", "unknown field", true, nil},
		{"not a serve flag", "--max-num-seqs=16", "--max-num-seq=16", "is not a flag of llmserve serve", false, nil},
		{"flag value apart", "- --max-num-seqs=16", "- --max-num-seqs\n            - \"16\"", "want --flag=value", false, nil},
		{"loopback host", "--host=0.0.0.0", "--host=127.0.0.1", "every interface", false, nil},
		{"port differs from flag", "--http-port=8080", "--http-port=9000", "the flag says 9000", false, nil},
		{"probe path", "path: /v2/health/ready", "path: /ready", "want /v2/health/ready", false, nil},
		{"grace too short", "terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds 30", false, nil},
		{"grace missing", "      terminationGracePeriodSeconds: 45\n", "", "terminationGracePeriodSeconds not set", false, nil},
		{"service selects nothing", "    app.kubernetes.io/component: server\n  ports:", "    app.kubernetes.io/component: head\n  ports:", "matches no pod", false, nil},
		{"service target port", "targetPort: grpc", "targetPort: grpcs", "target port grpcs", false, nil},
		{"root", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot", false, nil},
		{"port name", "- name: grpc\n              containerPort", "- name: grpc_port\n              containerPort", "port name", false, nil},
		{"object name", "name: llmserve\n  labels:", "name: LLMServe\n  labels:", "name:", false, nil},
		{"lws leader ready", "startupPolicy: LeaderCreated", "startupPolicy: LeaderReady", "LeaderCreated", false, []string{"lws-head-workers.yaml"}},
		{"lws group restarts", "restartPolicy: None", "restartPolicy: RecreateGroupOnPodRestart", "must not restart its group", false, []string{"lws-head-workers.yaml"}},
		{"lws leader runs a worker", "              - head\n", "              - worker\n", "want llmserve head", false, []string{"lws-head-workers.yaml"}},
		{"lws unknown field", "startupPolicy:", "startupPolicyy:", "unknown field", true, []string{"lws-head-workers.yaml"}},
		{"head flag", "--max-migrations=3", "--max-migration=3", "is not a flag of llmserve head", false, []string{"lws-head-workers.yaml"}},
		{"worker flag", "--role=both", "--roles=both", "is not a flag of llmserve worker", false, []string{"lws-head-workers.yaml"}},
		{"worker role", "--role=both", "--role=all", "want one of", false, []string{"lws-head-workers.yaml"}},
		{"pd no decode worker", "value: \"1\"", "value: \"3\"", "PREFILL_WORKERS", false, []string{"lws-pd.yaml"}},
		{"pd script role", "role=decode", "role=decoder", "--role=decoder", false, []string{"lws-pd.yaml"}},
		{"dns name", "- --workers-dns=llmserve-workers:8090", "- --workers-dns=llmserve-worker:8090", "not a headless Service", false, []string{"workers-dns.yaml"}},
		{"dns port", "- --workers-dns=llmserve-workers:8090", "- --workers-dns=llmserve-workers:8091", "worker port is 8090", false, []string{"workers-dns.yaml"}},
		{"kserve arg", "--model_dir=/mnt/models", "--model-path=/mnt/models", "--model_dir missing", false, []string{"kserve-servingruntime.yaml", "kserve-inferenceservice.yaml"}},
		{"kserve runtime", "runtime: llmserve", "runtime: llmserver", "not a ServingRuntime", false, []string{"kserve-inferenceservice.yaml", "kserve-servingruntime.yaml"}},
		{"kserve format", "name: gguf\n      runtime", "name: pmml\n      runtime", "not one of runtime", false, []string{"kserve-inferenceservice.yaml", "kserve-servingruntime.yaml"}},
		{"kserve protocol", "- grpc-v2", "- grpc-v3", "protocolVersion \"grpc-v3\"", false, []string{"kserve-servingruntime.yaml", "kserve-inferenceservice.yaml"}},
		{"kserve grace", "terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds 10", false, []string{"kserve-inferenceservice.yaml", "kserve-servingruntime.yaml"}},
		{"hpa target", "name: llmserve-decode\n  minReplicas", "name: llmserve-decoder\n  minReplicas", "is not a Deployment", false, []string{"hpa-decode.yaml", "workers-dns.yaml"}},
		{"hpa metric", "name: vllm:num_requests_waiting", "name: vllm:requests_waiting", "llmserve exports", false, []string{"hpa-decode.yaml", "workers-dns.yaml"}},
		{"kserve unknown field", "storageUri:", "storageURI:", "unknown field", true, []string{"kserve-inferenceservice.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = []string{"single.yaml"}
			}
			// The mistake goes into the first file; the rest are as they are.
			base, err := os.ReadFile(filepath.Join("kubernetes", files[0]))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(base), tc.old) {
				t.Fatalf("%s no longer holds %q", files[0], tc.old)
			}
			objs, err := decodeAll(files[0], []byte(strings.Replace(string(base), tc.old, tc.new, 1)))
			if err == nil {
				objs = append(objs, readManifests(t, files[1:]...)...)
			}
			if tc.decode {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("decode error %v, want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			errs := check(objs, fs)
			for _, e := range errs {
				if strings.Contains(e.Error(), tc.want) {
					return
				}
			}
			t.Errorf("check found %v, want an error saying %q", errs, tc.want)
		})
	}
}

// TestDeployDocCoversFiles: docs/DEPLOY.md names every manifest, both
// Dockerfiles and every chart mode.
func TestDeployDocCoversFiles(t *testing.T) {
	doc, err := os.ReadFile("../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for f := range manifestKinds {
		want = append(want, f)
	}
	want = append(want, "Dockerfile.cpu", "Dockerfile.cuda", "make cuda", "mode=single", "mode=kserve", "mode=lws", "mode=pd", "pd.discovery=dns")
	for _, w := range want {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/DEPLOY.md does not mention %s", w)
		}
	}
}
